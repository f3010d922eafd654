import { EventEmitter } from 'node:events';
import { Readable, Writable } from 'node:stream';
import zlib from 'node:zlib';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpProblem } from '@app/shared/platform/problem';
import { requestTarget } from '@app/shared/platform/request-target';
import { headerList, representations, type CachedResponse } from '../src/cache/entry.js';
import { Exchange, type CacheOutcome } from '../src/exchange.js';
import { RATE_LIMITED } from '../src/rate-limits/problems.js';
import { cachedItem, responseWriter } from './fixtures.js';

/** The one writer of the gateway's responses: held entries, relayed answers, problems, and its own headers on each. */
const entry = cachedItem;

/** A response that records what is written to it, in one writeHead or by setHeader. */
function recorder() {
  const writes: { status: number; headers: string[] }[] = [];
  const ends: (Buffer | string | undefined)[] = [];
  const set: Record<string, string> = {};
  const chunks: Buffer[] = [];
  // A stream, so that a relayed body can be piped into it.
  const res = Object.assign(new Writable({ write: (chunk: Buffer, _encoding, done) => done(void chunks.push(chunk)) }), {
    headersSent: false,
    statusCode: 200,
    writeHead(status: number, headers: string[]) {
      writes.push({ status, headers: [...headers] });
      res.headersSent = true;
      return res;
    },
    setHeader(name: string, value: string | number) {
      set[name.toLowerCase()] = String(value);
      return res;
    },
    hasHeader: (name: string) => name.toLowerCase() in set,
    end(body?: Buffer | string) {
      ends.push(body);
      return res;
    },
    destroy: () => undefined,
  });
  return { res: res as unknown as ServerResponse, writes, ends, set, chunks };
}

/** An exchange for a request to `url`, as the pipeline makes it. */
function exchangeOf(request: { method: string; url: string; headers?: Record<string, string> }, res: ServerResponse, decided: Partial<Pick<Exchange, 'cache' | 'rateLimit' | 'closeConnection'>> = {}) {
  const req = { method: request.method, url: request.url, headers: request.headers ?? {} } as unknown as IncomingMessage;
  (res as { req?: IncomingMessage }).req = req;
  const exchange = new Exchange(req, res, requestTarget(request.url), undefined, { requestId: 'r-9', log: undefined as never });
  Object.assign(exchange, decided);
  return exchange;
}

/** `[name, value, …]` as an object, failing on a name sent twice (any case). */
function asObject(list: string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i]!.toLowerCase();
    if (name in headers) throw new Error(`${name} sent twice`);
    headers[name] = list[i + 1]!;
  }
  return headers;
}

function writer() {
  const counted: CacheOutcome[] = [];
  return { writer: responseWriter((outcome) => void counted.push(outcome)), counted };
}

const ITEM = '/api/products/0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b';

describe('ResponseWriter.held', () => {
  it('sends status, stored headers, its own headers and the body in one writeHead', () => {
    const { res, writes, ends } = recorder();
    const { writer: respond, counted } = writer();
    respond.held(exchangeOf({ method: 'GET', url: ITEM }, res, { cache: 'hit', rateLimit: { RateLimit: '"read";r=9;t=60' } }), entry, { ageSeconds: 4 });
    expect(writes).toHaveLength(1);
    expect(writes[0]!.status).toBe(200);
    expect(asObject(writes[0]!.headers)).toEqual({
      ...entry.headers,
      'x-cache': 'HIT',
      age: '4',
      'x-request-id': 'r-9',
      'x-content-type-options': 'nosniff',
      ratelimit: '"read";r=9;t=60',
      'content-length': String(entry.body.length),
    });
    expect(ends).toEqual([entry.body]);
    expect(counted).toEqual(['hit']);
  });

  it('leaves out Age when not given, and says MISS for a collapsed request', () => {
    const { res, writes } = recorder();
    const { writer: respond, counted } = writer();
    respond.held(exchangeOf({ method: 'GET', url: ITEM }, res, { cache: 'collapsed' }), entry);
    const sent = asObject(writes[0]!.headers);
    expect(sent['x-cache']).toBe('MISS');
    expect(sent).not.toHaveProperty('age');
    expect(counted).toEqual(['collapsed']);
  });

  it('says MISS for a miss and STALE for a stale entry', () => {
    for (const [cache, said] of [['miss', 'MISS'], ['stale', 'STALE']] as const) {
      const { res, writes } = recorder();
      writer().writer.held(exchangeOf({ method: 'GET', url: ITEM }, res, { cache }), entry);
      expect(asObject(writes[0]!.headers)['x-cache']).toBe(said);
    }
  });

  it('answers HEAD with the headers of the GET, Content-Length included, and no body', () => {
    const { res, writes, ends } = recorder();
    writer().writer.held(exchangeOf({ method: 'HEAD', url: ITEM }, res, { cache: 'hit' }), entry);
    expect(writes[0]!.status).toBe(200);
    expect(asObject(writes[0]!.headers)['content-length']).toBe(String(entry.body.length));
    expect(ends).toEqual([undefined]);
  });

  it('answers 304 without body, Content-Type or Content-Length when If-None-Match matches (weakly)', () => {
    for (const ifNoneMatch of ['"v3"', 'W/"v3"', '"v1", "v3"', '*']) {
      const { res, writes, ends } = recorder();
      writer().writer.held(exchangeOf({ method: 'GET', url: ITEM, headers: { 'if-none-match': ifNoneMatch } }, res, { cache: 'hit' }), entry);
      expect(writes).toHaveLength(1);
      expect(writes[0]!.status).toBe(304);
      expect(asObject(writes[0]!.headers)).toEqual({ etag: '"v3"', 'cache-control': 'max-age=0', 'x-cache': 'HIT', 'x-request-id': 'r-9', 'x-content-type-options': 'nosniff' });
      expect(ends).toEqual([undefined]);
    }
  });

  it('sends the full response when If-None-Match does not match, or there is no ETag, or it is no 200', () => {
    const cases: [CachedResponse, string][] = [
      [entry, '"v2"'],
      [{ ...entry, headers: { 'content-type': 'application/json' } }, '*'],
      [{ ...entry, status: 203 }, '"v3"'],
    ];
    for (const [held, ifNoneMatch] of cases) {
      const { res, writes, ends } = recorder();
      writer().writer.held(exchangeOf({ method: 'GET', url: ITEM, headers: { 'if-none-match': ifNoneMatch } }, res, { cache: 'hit' }), held);
      expect(writes[0]!.status).toBe(held.status);
      expect(ends).toEqual([held.body]);
    }
  });

  it('sends an entry’s prepared header list as it is, and leaves it unchanged for the next request', () => {
    const list = headerList(entry.headers);
    const held = { ...entry, headerList: Object.freeze([...list]) };
    for (let i = 0; i < 2; i++) {
      const { res, writes } = recorder();
      writer().writer.held(exchangeOf({ method: 'GET', url: ITEM }, res, { cache: 'hit' }), held);
      expect(writes[0]!.headers).toEqual([...list, 'X-Request-Id', 'r-9', 'X-Content-Type-Options', 'nosniff', 'X-Cache', 'HIT', 'Content-Length', String(entry.body.length)]);
    }
    expect(held.headerList).toEqual(list);
  });

  it('sends the variant in the coding the client takes best, and identity to one that takes none', async () => {
    const body = Buffer.from(JSON.stringify({ items: Array.from({ length: 100 }, (_, i) => ({ id: i, name: `Product ${i}` })) }));
    const held = await representations(200, { 'content-type': 'application/json', etag: 'W/"4"' }, body, body.length);
    for (const [acceptEncoding, coding] of [['gzip', 'gzip'], [undefined, undefined]] as const) {
      const { res, writes, ends } = recorder();
      writer().writer.held(exchangeOf({ method: 'GET', url: ITEM, headers: acceptEncoding ? { 'accept-encoding': acceptEncoding } : {} }, res), held);
      expect(asObject(writes[0]!.headers)['content-encoding']).toBe(coding);
      expect(ends[0]).toBe(coding ? held.variants!.gzip!.body : body);
    }
  });

  it('passes the Set-Cookie it is given to the one client it is for', () => {
    const { res, writes } = recorder();
    writer().writer.held(exchangeOf({ method: 'GET', url: ITEM }, res, { cache: 'miss' }), entry, { setCookie: ['a=1', 'b=2'] });
    expect(writes[0]!.headers.filter((_value, i, list) => list[i - 1] === 'Set-Cookie')).toEqual(['a=1', 'b=2']);
  });
});

describe('ResponseWriter.relay', () => {
  it('relays the service’s status and headers with its own in one writeHead, but no hop-by-hop, request id or nosniff of the service', () => {
    const { res, writes } = recorder();
    const { writer: respond, counted } = writer();
    const proxyRes = Object.assign(Readable.from([]), {
      statusCode: 201,
      rawHeaders: ['Content-Type', 'application/json', 'Connection', 'keep-alive', 'X-Request-Id', 'theirs', 'X-Content-Type-Options', 'nosniff', 'Location', '/api/products/1'],
    }) as unknown as IncomingMessage;
    respond.relay(exchangeOf({ method: 'POST', url: '/api/products' }, res, { rateLimit: { RateLimit: '"write";r=1;t=60' } }), proxyRes);
    expect(writes[0]!.status).toBe(201);
    expect(asObject(writes[0]!.headers)).toEqual({ 'content-type': 'application/json', location: '/api/products/1', 'x-request-id': 'r-9', 'x-content-type-options': 'nosniff', ratelimit: '"write";r=1;t=60' });
    expect(counted).toEqual([]);
  });

  it('says BYPASS on a read under /api the cache took no part in, and counts it', () => {
    const { res, writes } = recorder();
    const { writer: respond, counted } = writer();
    const proxyRes = Object.assign(Readable.from([]), { statusCode: 200, rawHeaders: [] }) as unknown as IncomingMessage;
    respond.relay(exchangeOf({ method: 'GET', url: ITEM }, res), proxyRes);
    expect(asObject(writes[0]!.headers)['x-cache']).toBe('BYPASS');
    expect(counted).toEqual(['bypass']);
  });

  describe('a read the service answers with a body worth compressing', () => {
    const body = Buffer.from(JSON.stringify({ items: Array.from({ length: 100 }, (_, i) => ({ id: i, name: `Product ${i}` })) }));
    const answer = (statusCode: number, headers: Record<string, string>) =>
      Object.assign(Readable.from([body]), { statusCode, headers, rawHeaders: Object.entries(headers).flat() }) as unknown as IncomingMessage;
    const json = { 'Content-Type': 'application/json', ETag: 'W/"7"', Vary: 'Origin' };
    const relayed = async (method: string, headers: Record<string, string>, proxyRes: IncomingMessage) => {
      const { res, writes, ends, chunks } = recorder();
      writer().writer.relay(exchangeOf({ method, url: '/api/products', headers }, res), proxyRes);
      while (ends.length === 0) await new Promise((resolve) => setImmediate(resolve));
      return { headers: asObject(writes[0]!.headers), body: Buffer.concat(chunks) };
    };
    // Node's own header object of a response: lower-case names.
    const lower = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));

    it('relays it in the client’s best coding, its length left to the chunks and its ETag weak', async () => {
      const headers = { ...json, 'Content-Length': String(body.length) };
      const { headers: sent, body: sentBody } = await relayed('GET', { 'accept-encoding': 'gzip, br' }, answer(200, lower(headers)));
      expect(sent).toMatchObject({ 'content-type': 'application/json', 'content-encoding': 'br', etag: 'W/"7"', vary: 'Origin, Accept-Encoding' });
      expect(sent).not.toHaveProperty('content-length');
      expect(zlib.brotliDecompressSync(sentBody).equals(body)).toBe(true);
    });

    it('compresses one of unknown length (chunked) too', async () => {
      const { headers: sent } = await relayed('GET', { 'accept-encoding': 'gzip' }, answer(200, lower(json)));
      expect(sent['content-encoding']).toBe('gzip');
    });

    it('relays as it came a write’s answer, another status, a small, incompressible or strongly tagged body, or to a client that takes no coding', async () => {
      const big = { ...json, 'Content-Length': String(body.length) };
      const cases: [string, Record<string, string>, number, Record<string, string>][] = [
        ['POST', { 'accept-encoding': 'br' }, 200, big],
        ['GET', { 'accept-encoding': 'br' }, 404, big],
        ['GET', { 'accept-encoding': 'br' }, 200, { ...json, 'Content-Length': '100' }],
        ['GET', { 'accept-encoding': 'br' }, 200, { ...big, 'Content-Type': 'image/png' }],
        ['GET', { 'accept-encoding': 'br' }, 200, { ...big, ETag: '"7"' }],
        ['GET', {}, 200, big],
      ];
      for (const [method, headers, status, answered] of cases) {
        const { headers: sent, body: sentBody } = await relayed(method, headers, answer(status, lower(answered)));
        expect(sent).not.toHaveProperty('content-encoding');
        expect(sent).toMatchObject(lower(answered));
        expect(sentBody.equals(body)).toBe(true);
      }
    });
  });

  it('lets go of the service’s answer when the client goes, and cuts the client when the answer fails', () => {
    const relayed = () => {
      const { res } = recorder();
      let cut = false;
      Object.assign(res, { destroy: () => void (cut = true) });
      const proxyRes = Object.assign(new Readable({ read: () => undefined }), { statusCode: 200, rawHeaders: [], complete: false }) as unknown as IncomingMessage;
      writer().writer.relay(exchangeOf({ method: 'POST', url: '/api/products' }, res), proxyRes);
      return { res, proxyRes, cut: () => cut };
    };
    const gone = relayed();
    gone.res.emit('close');
    expect(gone.proxyRes.destroyed).toBe(true);
    // A service answer that had all come in is left as it is.
    const whole = relayed();
    Object.assign(whole.proxyRes, { complete: true });
    whole.res.emit('close');
    expect(whole.proxyRes.destroyed).toBe(false);
    const failed = relayed();
    failed.proxyRes.emit('error', new Error('reset'));
    expect(failed.cut()).toBe(true);
    expect(gone.cut()).toBe(false);
  });

  it('drops a service’s answer that comes after the gateway answered', () => {
    const { res, writes } = recorder();
    (res as { headersSent: boolean }).headersSent = true;
    let resumed = false;
    const proxyRes = Object.assign(new EventEmitter(), { statusCode: 200, rawHeaders: [], resume: () => (resumed = true) }) as unknown as IncomingMessage;
    writer().writer.relay(exchangeOf({ method: 'POST', url: '/api/products' }, res), proxyRes);
    expect(writes).toEqual([]);
    expect(resumed).toBe(true);
  });
});

describe('ResponseWriter.failure', () => {
  /** An exchange whose failures are logged to `logged`, on a response that says whether it was cut. */
  function failing(headersSent = false) {
    const recorded = recorder();
    const logged: string[] = [];
    const exchange = exchangeOf({ method: 'GET', url: ITEM }, recorded.res);
    const log = { error: (_fields: object, message: string) => void logged.push(message) };
    Object.assign(exchange, { observed: { requestId: 'r-9', log } });
    let cut = false;
    Object.assign(recorded.res, { headersSent, destroy: () => void (cut = true) });
    return { ...recorded, exchange, logged, cut: () => cut };
  }

  it('answers a problem as it is, and anything else as a 500, logged, both with its own headers', () => {
    const unavailable = failing();
    writer().writer.failure(unavailable.exchange, new HttpProblem('service-unavailable', 'Down'));
    expect(unavailable.res.statusCode).toBe(503);
    expect(unavailable.set).toMatchObject({ 'x-request-id': 'r-9', 'x-cache': 'BYPASS' });
    const thrown = failing();
    writer().writer.failure(thrown.exchange, new Error('boom'));
    expect(thrown.res.statusCode).toBe(500);
    expect(thrown.set['x-request-id']).toBe('r-9');
    expect(thrown.logged).toHaveLength(1);
    expect(thrown.cut()).toBe(false);
  });

  it('cuts a response already under way, adding no header to it', () => {
    const underWay = failing(true);
    writer().writer.failure(underWay.exchange, new Error('boom'));
    expect(underWay.cut()).toBe(true);
    expect(underWay.set).toEqual({});
  });

  it('never throws: when answering fails too, it logs that and cuts the connection', () => {
    const broken = failing();
    Object.assign(broken.res, {
      setHeader: () => {
        throw new Error('cannot set');
      },
    });
    expect(() => writer().writer.failure(broken.exchange, new Error('boom'))).not.toThrow();
    expect(broken.logged).toEqual(['could not answer a failed request']);
    expect(broken.cut()).toBe(true);
  });
});

describe('ResponseWriter.problem', () => {
  it('writes problem+json with the request id, the RateLimit headers and the problem’s own headers', () => {
    const { res, set, ends } = recorder();
    writer().writer.problem(
      exchangeOf({ method: 'POST', url: '/api/products' }, res, { rateLimit: { RateLimit: '"write";r=0;t=9' }, closeConnection: true }),
      new HttpProblem(RATE_LIMITED, 'Over the budget', { headers: { 'Retry-After': '9' } }),
    );
    expect(res.statusCode).toBe(429);
    expect(set).toMatchObject({ 'x-request-id': 'r-9', ratelimit: '"write";r=0;t=9', 'retry-after': '9', connection: 'close', 'content-type': 'application/problem+json; charset=utf-8' });
    expect(set).not.toHaveProperty('x-cache');
    expect(JSON.parse(String(ends[0]))).toMatchObject({ status: 429, instance: '/api/products' });
  });

  it('says BYPASS on a read of a target with no canonical form, and nothing on the gateway’s own endpoints', () => {
    const refused = recorder();
    writer().writer.problem(exchangeOf({ method: 'GET', url: '/api/Users' }, refused.res), new HttpProblem('not-found', 'No resource'));
    expect(refused.set['x-cache']).toBe('BYPASS');
    const outsideApi = recorder();
    writer().writer.problem(exchangeOf({ method: 'GET', url: '/healthz#top' }, outsideApi.res), new HttpProblem('not-found', 'No resource'));
    expect(outsideApi.set['x-cache']).toBe('BYPASS');
    const own = recorder();
    writer().writer.ownHeaders(exchangeOf({ method: 'GET', url: '/healthz' }, own.res));
    expect(own.set).toEqual({ 'x-request-id': 'r-9', 'x-content-type-options': 'nosniff' });
  });

  it('closes the connection of a refused request whose declared body was never read, and only then', () => {
    const refused = (read: Partial<{ body: Buffer; complete: boolean; headers: Record<string, string> }>) => {
      const { res, set } = recorder();
      const exchange = exchangeOf({ method: 'POST', url: '/api/products', headers: read.headers ?? { 'content-length': '5' } }, res);
      Object.assign(exchange.req, { complete: read.complete ?? false });
      if (read.body) exchange.body = read.body;
      writer().writer.problem(exchange, new HttpProblem('not-found', 'No resource'));
      return set.connection;
    };
    expect(refused({})).toBe('close');
    expect(refused({ headers: { 'transfer-encoding': 'chunked' } })).toBe('close');
    expect(refused({ body: Buffer.from('12345') })).toBeUndefined();
    expect(refused({ complete: true })).toBeUndefined();
    expect(refused({ headers: { 'content-length': '0' } })).toBeUndefined();
  });
});

describe('headers a feature decided', () => {
  it('go out on whatever answers the request: a held response, a problem', () => {
    const decided = (res: ServerResponse) => Object.assign(exchangeOf({ method: 'GET', url: ITEM }, res), { responseHeaders: ['Quota-Remaining', '7'] });
    const held = recorder();
    writer().writer.held(decided(held.res), entry);
    expect(asObject(held.writes[0]!.headers)).toMatchObject({ 'quota-remaining': '7', 'x-request-id': 'r-9' });
    const refused = recorder();
    writer().writer.problem(decided(refused.res), new HttpProblem('not-found', 'No resource'));
    expect(refused.set).toMatchObject({ 'quota-remaining': '7' });
  });
});
