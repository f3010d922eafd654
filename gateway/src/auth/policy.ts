import type { RequestTarget } from '@app/shared/platform/request-target';
import type { CacheScopes } from '../cache/scope.js';

/**
 * Which scope a request needs: `<resource>:read` for GET and HEAD, `<resource>:write` for the
 * other methods, nothing for OPTIONS (it only lists the methods) or for targets no upstream serves
 * (they are 404s). Reads of the resources in `publicReads` need no token; user data is never one
 * of them (the config cannot make it so).
 *
 * It decides on the canonical target the front door made (the one the service acts on), through
 * the same classification the cache and the metrics use, so a request is authorised for the
 * resource it is then served from.
 */
export class AccessPolicy {
  /** Each resource's scopes, made once: a string made per request is hashed anew by every lookup. */
  readonly #scopes = new Map<string, { read: string; write: string }>();

  constructor(
    private readonly routes: Pick<CacheScopes, 'route'>,
    private readonly publicReads: ReadonlySet<string>,
  ) {}

  requiredScope(method: string, target: RequestTarget | undefined): string | undefined {
    if (method === 'OPTIONS' || this.routes.route(target) === undefined) return undefined;
    const resource = target?.api?.resource;
    if (resource === undefined) return undefined;
    const reading = method === 'GET' || method === 'HEAD';
    if (reading && this.publicReads.has(resource)) return undefined;
    let scopes = this.#scopes.get(resource);
    if (!scopes) {
      // Only resources with a route get here: as many as there are upstreams.
      scopes = { read: `${resource}:read`, write: `${resource}:write` };
      this.#scopes.set(resource, scopes);
    }
    return reading ? scopes.read : scopes.write;
  }
}
