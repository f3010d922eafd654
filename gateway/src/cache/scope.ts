import { UUID_V7 } from '@app/shared/resource';
import { servesPath, type Upstream } from '../upstream.js';

/**
 * Which cache keys a request reads or renews. Each resource has a generation for its list pages
 * (`g:{users}`) and one per item (`g:{users:<id>}`); an entry is stored with the generation it was
 * fetched under and is valid only while that generation is current. The hash tag (`{…}`) puts an
 * entry and its generation in the same Redis Cluster slot, so one MGET reads both.
 */
export interface ReadScope {
  entryKey: string;
  generationKey: string;
}

export class CacheScopes {
  /** Each upstream's `name` names its resource in the keys, e.g. `users` for `/api/users`. */
  constructor(private readonly upstreams: readonly Upstream[]) {}

  /** The entry and generation a GET of `url` uses, or undefined when the path is not cached. */
  read(url: string): ReadScope | undefined {
    const [path = '', query = ''] = url.split('?', 2);
    const target = this.#target(path);
    if (!target) return undefined;
    const tag = target.id === undefined ? target.resource : `${target.resource}:${target.id}`;
    return { entryKey: `c:{${tag}}:${normalisedQuery(query)}`, generationKey: `g:{${tag}}` };
  }

  /** The generations a successful write to `url` renews: the list pages, and the item if any. */
  written(url: string): string[] {
    const target = this.#target(url.split('?', 1)[0] ?? '');
    if (!target) return [];
    const lists = `g:{${target.resource}}`;
    return target.id === undefined ? [lists] : [lists, `g:{${target.resource}:${target.id}}`];
  }

  /** A metrics label for the path: `/api/users`, `/api/users/{id}`, or undefined. */
  route(path: string): string | undefined {
    const upstream = this.upstreams.find((u) => servesPath(u, path));
    return upstream && (path === upstream.prefix ? upstream.prefix : `${upstream.prefix}/{id}`);
  }

  /** The resource and item id a path names; undefined for other paths (only well-formed ids are cached). */
  #target(path: string): { resource: string; id?: string } | undefined {
    const upstream = this.upstreams.find((u) => servesPath(u, path));
    if (!upstream) return undefined;
    if (path === upstream.prefix) return { resource: upstream.name };
    const id = path.slice(upstream.prefix.length + 1);
    return UUID_V7.test(id) ? { resource: upstream.name, id } : undefined;
  }
}

/** Parameter order does not matter: `?b=2&a=1` and `?a=1&b=2` are one entry. */
function normalisedQuery(query: string): string {
  const params = [...new URLSearchParams(query)];
  params.sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : x > y ? 1 : 0) : a < b ? -1 : 1));
  return new URLSearchParams(params).toString();
}
