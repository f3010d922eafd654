import type { ApiTarget, RequestTarget } from '@app/shared/platform/request-target';
import type { Upstream } from '../upstream.js';

/**
 * Which cache keys a request reads or renews, from its canonical target (../front-door.ts), so
 * every spelling the service would act on as one resource is that resource's scope here. Each resource has a generation for its list pages
 * (`g:{users}`) and one per item (`g:{users:<id>}`); an entry is stored with the generation it was
 * fetched under and is valid only while that generation is current. The hash tag (`{…}`) puts an
 * entry and its generation in the same Redis Cluster slot, so one MGET reads both.
 */
export interface ReadScope extends WriteScope {
  entryKey: string;
}

/**
 * What a write affects for one tag: its generation, and its hold (`h:{…}`), set while a write whose
 * outcome is unknown may still land: no entry of the tag is read or stored while it exists.
 */
export interface WriteScope {
  generationKey: string;
  holdKey: string;
}

const keysOf = (tag: string): WriteScope => ({ generationKey: `g:{${tag}}`, holdKey: `h:{${tag}}` });

/** The generation key of the scope a hold key belongs to (`h:{users:1}` → `g:{users:1}`), or undefined. */
export const generationKeyOfHold = (key: string): string | undefined => (key.startsWith('h:{') ? `g:${key.slice(2)}` : undefined);

export class CacheScopes {
  readonly #resources: Set<string>;
  /** Each resource's route labels, made once: `/api/users` and `/api/users/{id}`. */
  readonly #routes: Map<string, { list: string; item: string }>;

  /**
   * Each upstream's `name` names its resource, as in its prefix: `users` for `/api/users`. Every
   * upstream has routes; only those with `cachedReads` (unless false) have cache scopes.
   */
  constructor(upstreams: readonly (Upstream & { cachedReads?: boolean })[]) {
    this.#resources = new Set(upstreams.filter(({ cachedReads }) => cachedReads !== false).map((upstream) => upstream.name));
    this.#routes = new Map(upstreams.map(({ name }) => [name, { list: `/api/${name}`, item: `/api/${name}/{id}` }]));
  }

  /** The entry and generation a GET of `target` uses, or undefined when it is not cached. */
  read(target: RequestTarget): ReadScope | undefined {
    const tag = this.#tag(target);
    return tag === undefined ? undefined : { entryKey: `c:{${tag}}:${normalisedQuery(target.query)}`, ...keysOf(tag) };
  }

  /** What a write to `target` affects: the list pages, and the item if any. */
  written(target: RequestTarget | undefined): WriteScope[] {
    const api = target && this.#served(target);
    if (!api) return [];
    const lists = keysOf(api.resource);
    return api.id === undefined ? [lists] : [lists, keysOf(`${api.resource}:${api.id}`)];
  }

  /** A metrics label for the target: `/api/users`, `/api/users/{id}`, or undefined. */
  route(target: RequestTarget | undefined): string | undefined {
    const api = target?.api;
    const routes = api && this.#routes.get(api.resource);
    return routes && (api.id === undefined ? routes.list : routes.item);
  }

  #served(target: RequestTarget): ApiTarget | undefined {
    return target.api && this.#resources.has(target.api.resource) ? target.api : undefined;
  }

  #tag(target: RequestTarget): string | undefined {
    const api = this.#served(target);
    return api && (api.id === undefined ? api.resource : `${api.resource}:${api.id}`);
  }
}

/** Parameter order does not matter: `?b=2&a=1` and `?a=1&b=2` are one entry. */
function normalisedQuery(query: string): string {
  if (query === '') return ''; // most reads: nothing to parse or sort
  const params = [...new URLSearchParams(query)];
  params.sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : x > y ? 1 : 0) : a < b ? -1 : 1));
  return new URLSearchParams(params).toString();
}
