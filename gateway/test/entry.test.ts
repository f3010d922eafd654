import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { type CachedResponse, decode, encode, headerList, isStorable, sendHeld, storableHeaders } from '../src/cache/entry.js';

/** A cached response: how it is stored, what may be stored, and how it is sent. */
const entry: CachedResponse = {
  generation: 'g-7',
  storedAt: 1_700_000_000_000,
  status: 200,
  headers: { 'content-type': 'application/json', etag: '"v3"', 'cache-control': 'max-age=0' },
  body: Buffer.from('{"id":1}\n{"line":2}'),
};

describe('encode and decode', () => {
  it('give back the entry as it was stored, body bytes and all (newlines included)', () => {
    const decoded = decode(encode(entry));
    expect(decoded).toEqual({ generation: 'g-7', storedAt: 1_700_000_000_000, status: 200, headers: entry.headers, body: entry.body });
    expect(decoded!.body.equals(entry.body)).toBe(true);
  });

  it('keep an empty body and a binary one', () => {
    expect(decode(encode({ ...entry, body: Buffer.alloc(0) }))!.body).toHaveLength(0);
    const binary = Buffer.from([0, 0x0a, 0xff, 0x0a, 0x7b]);
    expect(decode(encode({ ...entry, body: binary }))!.body.equals(binary)).toBe(true);
  });

  it('read what is not an entry as nothing', () => {
    expect(decode(Buffer.from('no newline at all'))).toBeUndefined();
    expect(decode(Buffer.from('{not json\nbody'))).toBeUndefined();
  });
});

describe('isStorable', () => {
  it('stores a 200 without no-store, private or Set-Cookie', () => {
    expect(isStorable(200, {})).toBe(true);
    expect(isStorable(200, { 'cache-control': 'public, max-age=60' })).toBe(true);
  });

  it('never stores another status', () => {
    for (const status of [201, 204, 206, 301, 304, 404, 500]) expect(isStorable(status, {})).toBe(false);
  });

  it('never stores no-store, private (any case) or a Set-Cookie', () => {
    expect(isStorable(200, { 'cache-control': 'no-store' })).toBe(false);
    expect(isStorable(200, { 'cache-control': 'max-age=60, Private' })).toBe(false);
    expect(isStorable(200, { 'set-cookie': ['a=1'] })).toBe(false);
  });
});

describe('storableHeaders', () => {
  it('keeps the representation headers and drops those of the connection or of this one response', () => {
    const headers: IncomingHttpHeaders = {
      'content-type': 'application/json',
      etag: '"v3"',
      'cache-control': 'max-age=0',
      vary: 'Accept',
      connection: 'keep-alive',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      date: 'Wed, 25 Nov 2026 16:00:00 GMT',
      'x-request-id': 'r-1',
      'content-length': '8',
      age: '3',
      'x-cache': 'MISS',
      'set-cookie': ['a=1'],
    };
    expect(storableHeaders(headers)).toEqual({ 'content-type': 'application/json', etag: '"v3"', 'cache-control': 'max-age=0', vary: 'Accept' });
  });
});

/** A response that records what is written to it. */
function recorder() {
  const writes: { status: number; headers: string[] }[] = [];
  const ends: (Buffer | undefined)[] = [];
  const res = {
    writeHead(status: number, headers: string[]) {
      writes.push({ status, headers: [...headers] });
      return res;
    },
    end(body?: Buffer) {
      ends.push(body);
      return res;
    },
  };
  return { res: res as unknown as ServerResponse, writes, ends };
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

describe('sendHeld', () => {
  it('sends status, stored headers, its own headers and the body in one writeHead', () => {
    const { res, writes, ends } = recorder();
    sendHeld({ method: 'GET', headers: {} }, res, entry, { outcome: 'HIT', ageSeconds: 4, requestId: 'r-9', more: { RateLimit: '"read";r=9;t=60' } });
    expect(writes).toHaveLength(1);
    expect(writes[0]!.status).toBe(200);
    expect(asObject(writes[0]!.headers)).toEqual({
      ...entry.headers,
      'x-cache': 'HIT',
      age: '4',
      'x-request-id': 'r-9',
      ratelimit: '"read";r=9;t=60',
      'content-length': String(entry.body.length),
    });
    expect(ends).toEqual([entry.body]);
  });

  it('leaves out Age and X-Request-Id when not given', () => {
    const { res, writes } = recorder();
    sendHeld({ method: 'GET', headers: {} }, res, entry, { outcome: 'MISS' });
    const sent = asObject(writes[0]!.headers);
    expect(sent['x-cache']).toBe('MISS');
    expect(sent).not.toHaveProperty('age');
    expect(sent).not.toHaveProperty('x-request-id');
  });

  it('answers HEAD with the headers of the GET, Content-Length included, and no body', () => {
    const { res, writes, ends } = recorder();
    sendHeld({ method: 'HEAD', headers: {} }, res, entry, { outcome: 'HIT' });
    expect(writes[0]!.status).toBe(200);
    expect(asObject(writes[0]!.headers)['content-length']).toBe(String(entry.body.length));
    expect(ends).toEqual([undefined]);
  });

  it('answers 304 without body, Content-Type or Content-Length when If-None-Match matches (weakly)', () => {
    for (const ifNoneMatch of ['"v3"', 'W/"v3"', '"v1", "v3"', '*']) {
      const { res, writes, ends } = recorder();
      sendHeld({ method: 'GET', headers: { 'if-none-match': ifNoneMatch } }, res, entry, { outcome: 'HIT', requestId: 'r-1' });
      expect(writes).toHaveLength(1);
      expect(writes[0]!.status).toBe(304);
      expect(asObject(writes[0]!.headers)).toEqual({ etag: '"v3"', 'cache-control': 'max-age=0', 'x-cache': 'HIT', 'x-request-id': 'r-1' });
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
      sendHeld({ method: 'GET', headers: { 'if-none-match': ifNoneMatch } }, res, held, { outcome: 'HIT' });
      expect(writes[0]!.status).toBe(held.status);
      expect(ends).toEqual([held.body]);
    }
  });

  it('sends an entry’s prepared header list as it is, and leaves it unchanged for the next request', () => {
    const list = headerList(entry.headers);
    const held = { ...entry, headerList: Object.freeze([...list]) };
    for (let i = 0; i < 2; i++) {
      const { res, writes } = recorder();
      sendHeld({ method: 'GET', headers: {} }, res, held, { outcome: 'HIT' });
      expect(writes[0]!.headers).toEqual([...list, 'X-Cache', 'HIT', 'Content-Length', String(entry.body.length)]);
    }
    expect(held.headerList).toEqual(list);
  });
});

describe('headerList', () => {
  it('lists the headers as name, value pairs in their order', () => {
    expect(headerList({ a: '1', b: '2' })).toEqual(['a', '1', 'b', '2']);
  });
});
