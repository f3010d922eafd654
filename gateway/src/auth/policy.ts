import type { CacheScopes } from '../cache/scope.js';
import { servesPath, type Upstream } from '../upstream.js';

/**
 * Which scope a request needs: `<resource>:read` for GET and HEAD, `<resource>:write` for the
 * other methods, nothing for OPTIONS (it only lists the methods) or for paths no upstream serves
 * (they are 404s). Reads of the resources in `publicReads` need no token; user data is never one
 * of them (the config cannot make it so).
 *
 * The resource is decided by the same route classification the cache and the metrics use, so a
 * request is authorised for the resource it is then served from.
 */
export class AccessPolicy {
  constructor(
    private readonly upstreams: readonly Upstream[],
    private readonly routes: Pick<CacheScopes, 'route'>,
    private readonly publicReads: ReadonlySet<string>,
  ) {}

  requiredScope(method: string, path: string): string | undefined {
    if (method === 'OPTIONS') return undefined;
    const route = this.routes.route(path);
    const resource = route && this.upstreams.find((upstream) => servesPath(upstream, route))?.name;
    if (resource === undefined) return undefined;
    const reading = method === 'GET' || method === 'HEAD';
    if (reading && this.publicReads.has(resource)) return undefined;
    return `${resource}:${reading ? 'read' : 'write'}`;
  }
}
