import type { CachedResponse } from '../src/cache/entry.js';

/** A cached item as the unit tests of the cache and the response writer hold it: a strong ETag, a body with a newline. */
export const cachedItem: CachedResponse = {
  generation: 'g-7',
  storedAt: 1_700_000_000_000,
  status: 200,
  headers: { 'content-type': 'application/json', etag: '"v3"', 'cache-control': 'max-age=0' },
  body: Buffer.from('{"id":1}\n{"line":2}'),
};
