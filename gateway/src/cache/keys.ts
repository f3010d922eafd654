/** How long an entry is served: fresh for `ttlSeconds`, then as stale for `staleSeconds` while its service fails. */
export interface CacheLifetime {
  ttlSeconds: number;
  staleSeconds: number;
}

/**
 * The cache's keys for a tag, the part of a request target that routing/service-routes.ts says a read or write
 * touches: `users` for the list pages, `users:<id>` for one item. Each tag has a generation
 * (`g:{users}`); an entry is stored with the generation it was fetched under and is valid only
 * while that generation is current. The hash tag (`{…}`) puts an entry and its generation in the
 * same Redis Cluster slot, so one MGET reads both.
 */
export interface ReadKeying extends WriteKeying {
  entryKey: string;
  /** How long its entry lives, where its service sets that (services.json); each absent part is the cache's default. */
  lifetime?: Partial<CacheLifetime>;
}

/**
 * What a write affects for one tag: its generation, and its hold (`h:{…}`), set while a write whose
 * outcome is unknown may still land: no entry of the tag is read or stored while it exists.
 */
export interface WriteKeying {
  generationKey: string;
  holdKey: string;
}

export const writeKeyingOf = (tag: string): WriteKeying => ({ generationKey: `g:{${tag}}`, holdKey: `h:{${tag}}` });

/**
 * The entry, generation and hold a read of `tag` with `query` uses; `caller`'s own entry when
 * given (after a space, which neither a query nor a percent-encoded subject holds), under the same
 * generation; living `lifetime` when given. The generation and hold keys are made on first use: a
 * hit from memory looks up only the entry key, and every key is a new string per request.
 */
export const readKeyingOf = (tag: string, query: string, caller?: string, lifetime?: Partial<CacheLifetime>): ReadKeying =>
  new TagReadKeying(tag, caller === undefined ? `c:{${tag}}:${normalisedQuery(query)}` : `c:{${tag}}:${normalisedQuery(query)} ${caller}`, lifetime);

class TagReadKeying implements ReadKeying {
  #write: WriteKeying | undefined = undefined;

  constructor(
    private readonly tag: string,
    readonly entryKey: string,
    readonly lifetime: Partial<CacheLifetime> | undefined,
  ) {}

  get generationKey(): string {
    return (this.#write ??= writeKeyingOf(this.tag)).generationKey;
  }

  get holdKey(): string {
    return (this.#write ??= writeKeyingOf(this.tag)).holdKey;
  }
}

/** The generation key of the scope a hold key belongs to (`h:{users:1}` → `g:{users:1}`), or undefined. */
export const generationKeyOfHold = (key: string): string | undefined => (key.startsWith('h:{') ? `g:${key.slice(2)}` : undefined);

/**
 * Parameter order and spelling do not matter: `?b=2&a=1` and `?a=1&b=2` are one entry. Each
 * parameter is written one way (URLSearchParams's), and the parameters sorted as written.
 */
function normalisedQuery(query: string): string {
  if (query === '') return ''; // most reads: nothing to parse or sort
  return new URLSearchParams(query).toString().split('&').sort().join('&');
}
