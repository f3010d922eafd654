import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createLogger } from '@app/shared/platform/logger';
import { requestTarget } from '@app/shared/platform/request-target';
import type { CachedResponse } from '../../src/cache/entry.js';
import { addressCallerOf } from '../../src/rate-limits/caller.js';
import { Fills } from '../../src/cache/fills.js';
import type { Lookup, ResponseCache } from '../../src/cache/response-cache.js';
import type { ReadKeying } from '../../src/cache/keys.js';
import { ConcurrencyLimit } from '../../src/load-shedding/concurrency-limit.js';
import { Exchange, type CacheOutcome } from '../../src/exchange.js';
import { Routing } from '../../src/routing/service-routes.js';
import type { ServiceHop } from '../../src/proxy/service-hop.js';
import { CacheRead } from '../../src/cache/read-stage.js';
import type { FetchedResponse } from '../../src/proxy/upstream.js';
import { cachedItem, responseWriter } from '../fixtures.js';

/**
 * The cache's read stage on its own: which reads it takes part in, and what each client is answered
 * (hit, miss, collapsed, stale, or the service's failure) from a fake cache and a fake service.
 */
const logger = createLogger('cache-read-test', 'silent');
const routing = new Routing([
  { name: 'users', url: 'http://127.0.0.1:1', prefix: '/api/users', cachedReads: true, publicReads: false, owner: 'none' },
  { name: 'products', url: 'http://127.0.0.1:2', prefix: '/api/products', cachedReads: true, publicReads: true, owner: 'none' },
  { name: 'orders', url: 'http://127.0.0.1:3', prefix: '/api/orders', cachedReads: false, publicReads: false, owner: 'none' },
]);

const NOW = 1_800_000_000_000;
const TTL_MS = 10_000;
const STALE_MS = 30_000;
/** An entry of the users' list stored `secondsAgo` before NOW, under generation `g-1`. */
const storedAgo = (secondsAgo: number): CachedResponse => ({ ...cachedItem, generation: 'g-1', storedAt: NOW - secondsAgo * 1000 });

/**
 * What the stage asks of the cache, with its clock at NOW and the rules of the real one (fresh for
 * TTL_MS, servable stale for STALE_MS more): an entry held in memory, what a Redis lookup finds, the
 * generation it would create, and the entries stored.
 */
class FakeCache {
  inMemory: CachedResponse | undefined = undefined;
  found: Lookup | undefined = { generation: 'g-1' };
  created: string | undefined = 'g-new';
  storeFails = false;
  readonly lookups: string[] = [];
  readonly stored: { entryKey: string; entry: CachedResponse }[] = [];
  /** Whose space budget each store was charged to. */
  readonly chargedTo: string[] = [];
  readonly now = () => NOW;
  readonly settings = { maxEntryBytes: 262_144 };

  held(scope: ReadKeying): CachedResponse | undefined {
    return scope.entryKey === 'c:{users}:' ? this.inMemory : undefined;
  }

  async lookup(scope: ReadKeying): Promise<Lookup | undefined> {
    this.lookups.push(scope.entryKey);
    return this.found;
  }

  ageSeconds(entry: CachedResponse): number {
    return Math.floor((NOW - entry.storedAt) / 1000);
  }

  isFresh(entry: CachedResponse): boolean {
    return NOW - entry.storedAt < TTL_MS;
  }

  isServableStale(entry: CachedResponse): boolean {
    return NOW - entry.storedAt < TTL_MS + STALE_MS;
  }

  async generationFor(_scope: ReadKeying, lookup: Lookup): Promise<string | undefined> {
    return lookup.generation ?? this.created;
  }

  async store(scope: ReadKeying, entry: CachedResponse, caller: string): Promise<void> {
    if (this.storeFails) throw new Error('Redis went away');
    this.stored.push({ entryKey: scope.entryKey, entry });
    this.chargedTo.push(caller);
  }
}

/** A service whose fetches the test settles: each fetch is a deferred answer; `busy` sheds them (no slot). */
class FakeService {
  busy = false;
  readonly fetches: { url: string; answer: (fetched: FetchedResponse) => void; fail: (error: Error) => void }[] = [];
  readonly hop = {
    upstream: { name: 'users' },
    limit: new ConcurrencyLimit('users', { limit: 4, writeShare: 0.25 }),
    fetch: (exchange: Exchange): Promise<FetchedResponse> | undefined => {
      if (this.busy) return undefined;
      return new Promise((resolve, reject) => this.fetches.push({ url: exchange.req.url as string, answer: resolve, fail: reject }));
    },
  } as unknown as ServiceHop;
}

/** What a client got: its status, headers (lower-case names; Set-Cookie as a list) and body. */
interface Answer {
  status?: number;
  headers: Record<string, string>;
  cookies: string[];
  body?: string;
}

/** A response that records what the writer writes to it, whole (writeHead) or by setHeader. */
function recorder(req: IncomingMessage) {
  const answer: Answer = { headers: {}, cookies: [] };
  const record = (name: string, value: string) => {
    if (name.toLowerCase() === 'set-cookie') answer.cookies.push(value);
    else answer.headers[name.toLowerCase()] = value;
  };
  const res = {
    req,
    statusCode: 200,
    headersSent: false,
    writeHead(status: number, headers: string[]) {
      answer.status = status;
      for (let i = 0; i < headers.length; i += 2) record(headers[i] as string, headers[i + 1] as string);
      res.headersSent = true;
      return res;
    },
    setHeader: (name: string, value: string | number) => record(name, String(value)),
    hasHeader: (name: string) => name.toLowerCase() in answer.headers,
    end(body?: Buffer | string) {
      answer.status ??= res.statusCode;
      answer.body = body?.toString();
      return res;
    },
    destroy: () => undefined,
  };
  return { res: res as unknown as ServerResponse, answer };
}

function setup(options: { trustedProxyHops?: number } = {}) {
  const cache = new FakeCache();
  const service = new FakeService();
  const outcomes: CacheOutcome[] = [];
  const stage = new CacheRead({
    cache: cache as unknown as ResponseCache,
    fills: new Fills(),
    hops: new Map([
      ['users', service.hop],
      ['orders', service.hop],
    ]),
    writer: responseWriter((outcome) => void outcomes.push(outcome)),
    addressCaller: addressCallerOf(options.trustedProxyHops ?? 0),
  });
  /** Runs one request through the stage: what it returned (a promise when it waits), and what the client got. */
  const send = (url: string, options: { method?: string; headers?: Record<string, string>; remoteAddress?: string } = {}) => {
    const req = { method: options.method ?? 'GET', url, headers: options.headers ?? {}, complete: true, socket: { remoteAddress: options.remoteAddress } } as unknown as IncomingMessage;
    const { res, answer } = recorder(req);
    const target = requestTarget(url);
    const exchange = new Exchange(req, res, target, routing.service(target), { requestId: 'r-1', log: logger });
    return { returned: stage.run(exchange), answer };
  };
  return { cache, service, outcomes, send };
}

/** Lets every promise the stage chained run: its stores and the fills' bookkeeping. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

const fetched = (status: number, headers: IncomingHttpHeaders = {}, body = '{"id":2}'): FetchedResponse => ({
  status,
  headers: { 'content-type': 'application/json', ...headers },
  body: Buffer.from(body),
});

describe('CacheRead: the reads it takes part in', () => {
  it('is named for what it does, the name a list of the stages shows', () => {
    expect(new CacheRead({} as ConstructorParameters<typeof CacheRead>[0]).name).toBe('cache read');
  });

  it('answers a fresh entry held in memory at once, a HIT with its age and no round trip', () => {
    const { cache, outcomes, send } = setup();
    cache.inMemory = storedAgo(4);
    const { returned, answer } = send('/api/users', { headers: { 'if-none-match': '"other"' } });
    expect(returned).toBe(true);
    expect(answer).toMatchObject({ status: 200, body: cachedItem.body.toString() });
    expect(answer.headers).toMatchObject({ 'x-cache': 'HIT', age: '4', etag: '"v3"' });
    expect(outcomes).toEqual(['hit']);
    expect(cache.lookups).toEqual([]);
  });

  it('answers a HEAD too', () => {
    const { cache, send } = setup();
    cache.inMemory = storedAgo(0);
    const { returned, answer } = send('/api/users', { method: 'HEAD' });
    expect(returned).toBe(true);
    expect(answer).toMatchObject({ status: 200, body: undefined, headers: { 'x-cache': 'HIT', age: '0' } });
  });

  it.each([
    ['a write', { method: 'POST' }],
    ['an OPTIONS', { method: 'OPTIONS' }],
    ['a read with a token', { headers: { authorization: 'Bearer t' } }],
    ['a read with a cookie', { headers: { cookie: 'a=1' } }],
    ['a read with If-Match', { headers: { 'if-match': '"v3"' } }],
    ['a read with a body', { headers: { 'content-length': '2' } }],
    ['a read with a chunked body', { headers: { 'transfer-encoding': 'chunked' } }],
  ])('passes %s on to the service, whatever the cache holds', (_what, options) => {
    const { cache, send } = setup();
    cache.inMemory = storedAgo(0);
    const { returned, answer } = send('/api/users', options);
    expect(returned).toBe(false);
    expect(answer.status).toBeUndefined();
    expect(cache.lookups).toEqual([]);
  });

  it('passes on a read of no service, of a service whose reads are not cached, or of one it has no hop to', () => {
    const { cache, send } = setup();
    for (const url of ['/healthz', '/api/orders', '/api/products']) {
      const { returned, answer } = send(url);
      expect(returned).toBe(false);
      expect(answer.status).toBeUndefined();
    }
    expect(cache.lookups).toEqual([]);
  });
});

describe('CacheRead: a read through Redis', () => {
  it('answers a fresh entry Redis holds as a HIT with its age', async () => {
    const { cache, service, outcomes, send } = setup();
    cache.found = { generation: 'g-1', entry: storedAgo(9) };
    const { returned, answer } = send('/api/users?b=2&a=1');
    expect(returned).toBeInstanceOf(Promise);
    expect(await returned).toBe(true);
    expect(cache.lookups).toEqual(['c:{users}:a=1&b=2']);
    expect(answer).toMatchObject({ status: 200, headers: { 'x-cache': 'HIT', age: '9' }, body: cachedItem.body.toString() });
    expect(outcomes).toEqual(['hit']);
    expect(service.fetches).toEqual([]);
  });

  it('passes on when the cache cannot be used for the scope now, or no generation can be had for it', async () => {
    const { cache, service, send } = setup();
    cache.found = undefined;
    expect(await send('/api/users').returned).toBe(false);
    cache.found = { generation: null };
    cache.created = undefined;
    expect(await send('/api/users').returned).toBe(false);
    expect(service.fetches).toEqual([]);
  });

  it('fetches a miss, stores it under the generation the lookup found, and answers it as a MISS', async () => {
    const { cache, service, outcomes, send } = setup();
    // Expired: fetched again, under the generation current now (not the entry's, nor a new one).
    cache.found = { generation: 'g-2', entry: { ...storedAgo(11), generation: 'g-2' } };
    const { returned, answer } = send('/api/users');
    await settled();
    expect(service.fetches.map((fetch) => fetch.url)).toEqual(['/api/users']);
    service.fetches[0]?.answer(fetched(200, { etag: '"v4"', 'cache-control': 'max-age=0' }));
    expect(await returned).toBe(true);
    expect(answer).toMatchObject({ status: 200, headers: { 'x-cache': 'MISS', etag: '"v4"' }, body: '{"id":2}' });
    expect(answer.headers.age).toBeUndefined();
    expect(outcomes).toEqual(['miss']);
    await settled();
    expect(cache.stored).toEqual([
      {
        entryKey: 'c:{users}:',
        entry: { generation: 'g-2', storedAt: NOW, status: 200, headers: { 'content-type': 'application/json', etag: '"v4"', 'cache-control': 'max-age=0' }, body: Buffer.from('{"id":2}') },
      },
    ]);
  });

  it("charges an anonymous fill to the client the trusted proxy names, as the rate limits count it", async () => {
    const { cache, service, send } = setup({ trustedProxyHops: 1 });
    cache.found = { generation: 'g-2' };
    const { returned } = send('/api/users', { headers: { 'x-forwarded-for': '203.0.113.7' }, remoteAddress: '10.0.0.1' });
    await settled();
    service.fetches[0]?.answer(fetched(200));
    await returned;
    await settled();
    expect(cache.chargedTo).toEqual(['addr:203.0.113.7']);
  });

  it('stores a miss of a scope with no generation yet under the one it creates', async () => {
    const { cache, service, send } = setup();
    cache.found = { generation: null };
    const { returned } = send('/api/users');
    await settled();
    service.fetches[0]?.answer(fetched(200));
    expect(await returned).toBe(true);
    await settled();
    expect(cache.stored.map(({ entry }) => entry.generation)).toEqual(['g-new']);
  });

  it('answers but never stores what may not be kept, and gives its cookie to the client that fetched it', async () => {
    const { cache, service, send } = setup();
    const cookie = send('/api/users');
    const personal = send('/api/users?page=2');
    const missing = send('/api/users?page=3');
    await settled();
    service.fetches[0]?.answer(fetched(200, { 'set-cookie': ['s=1; HttpOnly'] }));
    service.fetches[1]?.answer(fetched(200, { 'cache-control': 'private' }));
    service.fetches[2]?.answer(fetched(404, {}, '{"status":404}'));
    await Promise.all([cookie.returned, personal.returned, missing.returned]);
    await settled();
    expect(cache.stored).toEqual([]);
    expect(cookie.answer).toMatchObject({ status: 200, cookies: ['s=1; HttpOnly'], headers: { 'x-cache': 'MISS' } });
    expect(personal.answer).toMatchObject({ status: 200, headers: { 'x-cache': 'MISS', 'cache-control': 'private' } });
    expect(missing.answer).toMatchObject({ status: 404, headers: { 'x-cache': 'MISS' }, body: '{"status":404}' });
  });

  it('answers the client even when its fill cannot be stored, and fetches the next miss afresh', async () => {
    const { cache, service, send } = setup();
    cache.storeFails = true;
    const first = send('/api/users');
    await settled();
    service.fetches[0]?.answer(fetched(200));
    expect(await first.returned).toBe(true);
    expect(first.answer.status).toBe(200);
    await settled();
    const second = send('/api/users');
    await settled();
    expect(service.fetches).toHaveLength(2);
    service.fetches[1]?.answer(fetched(200));
    expect(await second.returned).toBe(true);
  });
});

describe('CacheRead: concurrent misses and failures', () => {
  it('fetches concurrent misses of one entry once: the others are answered from it, collapsed, without its cookie', async () => {
    const { service, outcomes, send } = setup();
    const leader = send('/api/users');
    const follower = send('/api/users', { headers: { 'if-none-match': '"v5"' } });
    const other = send('/api/users?page=2');
    await settled();
    expect(service.fetches.map((fetch) => fetch.url)).toEqual(['/api/users', '/api/users?page=2']);
    service.fetches[0]?.answer(fetched(200, { etag: '"v5"', 'set-cookie': ['s=1'] }));
    service.fetches[1]?.answer(fetched(200));
    await Promise.all([leader.returned, follower.returned, other.returned]);
    expect(leader.answer).toMatchObject({ status: 200, cookies: ['s=1'], headers: { 'x-cache': 'MISS' } });
    expect(follower.answer).toMatchObject({ status: 304, cookies: [], headers: { 'x-cache': 'MISS', etag: '"v5"' } });
    expect(outcomes.sort()).toEqual(['collapsed', 'miss', 'miss']);
  });

  it('serves an entry expired less than the stale time ago, with its age, when the service cannot be reached', async () => {
    const { cache, service, outcomes, send } = setup();
    cache.found = { generation: 'g-1', entry: storedAgo(39) };
    const { returned, answer } = send('/api/users');
    await settled();
    service.fetches[0]?.fail(new Error('ECONNREFUSED'));
    expect(await returned).toBe(true);
    expect(answer).toMatchObject({ status: 200, headers: { 'x-cache': 'STALE', age: '39' }, body: cachedItem.body.toString() });
    expect(outcomes).toEqual(['stale']);
  });

  it('answers 502 when the service cannot be reached and nothing servable is stale', async () => {
    for (const found of [{ generation: 'g-1' }, { generation: 'g-1', entry: storedAgo(40) }]) {
      const { cache, service, outcomes, send } = setup();
      cache.found = found;
      const { returned, answer } = send('/api/users');
      await settled();
      service.fetches[0]?.fail(new Error('ECONNREFUSED'));
      expect(await returned).toBe(true);
      expect(answer.status).toBe(502);
      expect(answer.headers['x-cache']).toBe('MISS');
      expect(JSON.parse(answer.body ?? '{}')).toMatchObject({ detail: 'The users service could not be reached', instance: '/api/users' });
      expect(outcomes).toEqual(['miss']);
    }
  });

  it('serves stale instead of a 5xx of the service, and relays a 4xx or a 5xx with no stale entry', async () => {
    const answers = await Promise.all(
      [
        [500, storedAgo(20)],
        [499, storedAgo(20)],
        [503, undefined],
      ].map(async ([status, entry]) => {
        const { cache, service, send } = setup();
        cache.found = { generation: 'g-1', entry: entry as CachedResponse | undefined };
        const { returned, answer } = send('/api/users');
        await settled();
        service.fetches[0]?.answer(fetched(status as number, {}, 'from the service'));
        await returned;
        return answer;
      }),
    );
    expect(answers.map((answer) => [answer.status, answer.headers['x-cache'], answer.body])).toEqual([
      [200, 'STALE', cachedItem.body.toString()],
      [499, 'MISS', 'from the service'],
      [503, 'MISS', 'from the service'],
    ]);
  });

  it('serves stale when the service has no slot for the fill, else sheds it with 503 and Retry-After', async () => {
    const stale = setup();
    stale.service.busy = true;
    stale.cache.found = { generation: 'g-1', entry: storedAgo(15) };
    const served = stale.send('/api/users');
    expect(await served.returned).toBe(true);
    expect(served.answer).toMatchObject({ status: 200, headers: { 'x-cache': 'STALE', age: '15' } });

    const none = setup();
    none.service.busy = true;
    const shed = none.send('/api/users');
    expect(await shed.returned).toBe(true);
    expect(shed.answer).toMatchObject({ status: 503, headers: { 'x-cache': 'MISS', 'retry-after': '1' } });
    expect(none.outcomes).toEqual(['miss']);
  });
});
