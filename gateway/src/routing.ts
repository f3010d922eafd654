import type { RequestTarget } from '@app/shared/platform/request-target';
import { readScopeOf, writeScopeOf, type ReadScope, type WriteScope } from './cache/scope.js';
import type { ServedUpstream } from './config.js';
import type { Upstream } from './upstream.js';

/** One service as routing knows it: made once, when the gateway starts. */
export interface ServiceRoute {
  readonly upstream: ServedUpstream;
  /** Route labels for metrics and traces: `/api/users` and `/api/users/{id}` (never a raw id). */
  readonly labels: { readonly list: string; readonly item: string };
  /** The scopes a token needs: `users:read` for GET and HEAD, `users:write` for the rest. */
  readonly scopes: { readonly read: string; readonly write: string };
}

/**
 * Where a request goes and what it touches, decided once from its canonical target (the spelling
 * the services act on, shared/src/platform/request-target.ts) and the list of upstreams: which
 * upstream serves it, which scope a token needs for it, which cache entry a read uses and which
 * generations a write renews. Auth, the cache, the proxy, the metrics and the traces all ask here.
 * `/api/<name>` and everything below it is the upstream called `<name>`.
 */
export class Routing {
  readonly #services: Map<string, ServiceRoute>;

  constructor(
    upstreams: readonly ServedUpstream[],
    /** The services whose reads need no token (AUTH_PUBLIC_READS, as services.json allows). */
    private readonly publicReads: ReadonlySet<string> = new Set(upstreams.filter((upstream) => upstream.publicReads).map(({ name }) => name)),
  ) {
    this.#services = new Map(
      upstreams.map((upstream) => [
        upstream.name,
        { upstream, labels: { list: `/api/${upstream.name}`, item: `/api/${upstream.name}/{id}` }, scopes: { read: `${upstream.name}:read`, write: `${upstream.name}:write` } },
      ]),
    );
  }

  /** The service that serves `target`, or undefined (a path outside /api, or no such service: a 404). */
  service(target: RequestTarget | undefined): ServiceRoute | undefined {
    const api = target?.api;
    return api && this.#services.get(api.resource);
  }

  /** A route label for metrics and traces: `/api/users`, `/api/users/{id}`, or undefined. */
  label(target: RequestTarget | undefined): string | undefined {
    const service = this.service(target);
    return service && (target?.api?.id === undefined ? service.labels.list : service.labels.item);
  }

  /**
   * The scope a request needs: none for OPTIONS (it only lists the methods), for a target no
   * upstream serves (a 404), or for a read of a public service. User data is never public: the
   * configuration cannot make it so.
   */
  requiredScope(method: string, target: RequestTarget | undefined): string | undefined {
    const service = method === 'OPTIONS' ? undefined : this.service(target);
    if (!service) return undefined;
    if (method !== 'GET' && method !== 'HEAD') return service.scopes.write;
    return this.publicReads.has(service.upstream.name) ? undefined : service.scopes.read;
  }

  /** The cache entry a GET of `target` uses, or undefined when its service's reads are not cached. */
  readScope(target: RequestTarget): ReadScope | undefined {
    const tag = this.#cacheTag(target);
    return tag === undefined ? undefined : readScopeOf(tag, target.query);
  }

  /** The generations a write to `target` renews: its service's list pages, and the item if any. */
  writtenScopes(target: RequestTarget | undefined): WriteScope[] {
    const api = target?.api;
    if (!api || !this.#cached(target)) return [];
    const lists = writeScopeOf(api.resource);
    return api.id === undefined ? [lists] : [lists, writeScopeOf(`${api.resource}:${api.id}`)];
  }

  #cached(target: RequestTarget | undefined): boolean {
    return this.service(target)?.upstream.cachedReads === true;
  }

  #cacheTag(target: RequestTarget): string | undefined {
    const api = target.api;
    if (!api || !this.#cached(target)) return undefined;
    return api.id === undefined ? api.resource : `${api.resource}:${api.id}`;
  }
}

/** Whether an upstream's API description's `path` is its own: its prefix and everything below it (not `/api/usersx`). */
export const servesPath = ({ prefix }: Pick<Upstream, 'prefix'>, path: string) =>
  path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 0x2f); // '/'; no string made per request

