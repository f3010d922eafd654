import { kindOf } from '@app/shared/platform/http/method-kind';
import type { RequestTarget } from '@app/shared/platform/request-target';
import { ownershipPolicy, type OwnershipPolicy } from '@app/shared/platform/ownership-policy';
import { GATEWAY_ADMIN_SCOPE, scopesOfService } from '@app/shared/platform/services';
import { readKeyingOf, writeKeyingOf, type ReadKeying, type WriteKeying } from '../cache/keys.js';
import type { ServedUpstream, Upstream } from '../upstream-model.js';

/**
 * One service as routing knows it, made once when the gateway starts: what a request to it needs
 * and touches. Every answer is decided on the request's canonical target (the spelling the service
 * acts on, shared/src/platform/request-target.ts).
 */
export class ServiceRoute {
  /** Route labels for metrics and traces: `/api/users` and `/api/users/{id}` (never a raw id). */
  readonly #labels: { list: string; item: string };
  /** The scopes a token needs, made once: a string made per request is hashed anew by every lookup. */
  readonly #scopes: { read: string; write: string };
  /** The scope that reads and writes every record, in place of the read and write scopes. */
  readonly adminScope: string;
  /** What its ownership lets a caller read, change and cache (services.json): where it says so, each caller has cache entries of its own. */
  readonly ownership: OwnershipPolicy;

  constructor(
    readonly upstream: ServedUpstream,
    /** Whether its reads need no token (AUTH_PUBLIC_READS, as services.json allows). */
    private readonly publicReads: boolean,
  ) {
    this.#labels = { list: upstream.prefix, item: `${upstream.prefix}/{id}` };
    const { read, write, admin } = scopesOfService(upstream.name);
    this.#scopes = { read, write };
    this.adminScope = admin;
    this.ownership = ownershipPolicy(upstream.owner);
  }

  label(target: RequestTarget): string {
    return target.api?.id === undefined ? this.#labels.list : this.#labels.item;
  }

  /**
   * The scope a request needs: `<name>:read` for GET and HEAD, `<name>:write` for the rest; none for
   * OPTIONS (it only lists the methods) or for a read of a public service. User data is never
   * public: the configuration cannot make it so.
   */
  requiredScope(method: string): string | undefined {
    const kind = kindOf(method);
    if (kind === 'options') return undefined;
    if (kind === 'write') return this.#scopes.write;
    return this.publicReads ? undefined : this.#scopes.read;
  }

  /**
   * The cache entry a GET of `target` by `caller` (its forwarded subject, if any) uses, or undefined
   * when the service's reads are not cached. Where the ownership policy says so, the entry is the
   * caller's own: what the service answered one caller is never served to another. It lives as long
   * as the service's entry in services.json says, where it says so.
   */
  readKeying(target: RequestTarget, caller: string | undefined): ReadKeying | undefined {
    const id = target.api?.id;
    if (!this.upstream.cachedReads) return undefined;
    const tag = id === undefined ? this.upstream.name : `${this.upstream.name}:${id}`;
    return readKeyingOf(tag, target.query, this.ownership.cachedPerCaller ? (caller ?? '') : undefined, this.upstream.cache);
  }

  /** The generations a write to `target` renews: the list pages, and the item if any. */
  writtenKeyings(target: RequestTarget): WriteKeying[] {
    if (!this.upstream.cachedReads) return [];
    const lists = writeKeyingOf(this.upstream.name);
    const id = target.api?.id;
    return id === undefined ? [lists] : [lists, writeKeyingOf(`${this.upstream.name}:${id}`)];
  }
}

/**
 * Where a request goes, decided once from its canonical target and the list of upstreams:
 * `/api/<name>` and everything below it is the upstream called `<name>`. Its ServiceRoute then says
 * which scope a token needs, which cache entry a read uses and which generations a write renews:
 * auth, the cache, the proxy, the metrics and the traces all ask here.
 */
export class Routing {
  readonly #services: Map<string, ServiceRoute>;

  constructor(upstreams: readonly ServedUpstream[]) {
    this.#services = new Map(upstreams.map((upstream) => [upstream.name, new ServiceRoute(upstream, upstream.publicReads)]));
  }

  /** The service that serves `target`, or undefined (a path outside /api, or no such service: a 404). */
  service(target: RequestTarget | undefined): ServiceRoute | undefined {
    const api = target?.api;
    return api && this.#services.get(api.resource);
  }

  /** A route label for metrics and traces: `/api/users`, `/api/users/{id}`, or undefined. */
  label(target: RequestTarget | undefined): string | undefined {
    return target && this.service(target)?.label(target);
  }
}

/** Whether an upstream's API description's `path` is its own: its prefix and everything below it (not `/api/usersx`). */
export const servesPath = ({ prefix }: Pick<Upstream, 'prefix'>, path: string) =>
  path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 0x2f); // '/'; no string made per request

/** The gateway's administration endpoints, outside /api: authenticated like the API, with their own scope. */
export const ADMIN_PATH = '/admin';

/** The scope a request to one of the gateway's own endpoints needs: GATEWAY_ADMIN_SCOPE under ADMIN_PATH (but OPTIONS), none elsewhere. */
export const ownEndpointScope = (path: string, method: string): string | undefined =>
  kindOf(method) !== 'options' && (path === ADMIN_PATH || path.startsWith(`${ADMIN_PATH}/`)) ? GATEWAY_ADMIN_SCOPE : undefined;
