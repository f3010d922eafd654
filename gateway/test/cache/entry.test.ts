import type { IncomingHttpHeaders } from 'node:http';
import { decode, encode, headerList, isStorable, representations, storableHeaders } from '../../src/cache/entry.js';
import { cachedItem } from '../fixtures.js';

/** A cached response: how it is stored and what may be stored. */
const entry = cachedItem;

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
    // Metadata without the newline after it is no entry, however well it parses.
    expect(decode(Buffer.from(`${JSON.stringify({ g: 'g-7', t: 1, s: 200, h: {} })}}`))).toBeUndefined();
  });

  it('read variants longer than what is stored after the metadata as nothing', () => {
    const stored = (brLength: number) => Buffer.from(`${JSON.stringify({ g: 'g-7', t: 1, s: 200, h: {}, v: { br: brLength } })}\nabcd`);
    // All four bytes the br variant's, the body empty: an entry.
    expect(decode(stored(4))).toMatchObject({ body: Buffer.alloc(0), variants: { br: { body: Buffer.from('abcd') } } });
    expect(decode(stored(5))).toBeUndefined();
    expect(decode(stored(6))).toBeUndefined();
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
      'x-content-type-options': 'nosniff',
    };
    expect(storableHeaders(headers)).toEqual({ 'content-type': 'application/json', etag: '"v3"', 'cache-control': 'max-age=0', vary: 'Accept' });
  });
});

describe('headerList', () => {
  it('lists the headers as name, value pairs in their order', () => {
    expect(headerList({ a: '1', b: '2' })).toEqual(['a', '1', 'b', '2']);
  });
});

describe('representations', () => {
  const MAX_ENTRY_BYTES = 262_144;
  const page = Buffer.from(JSON.stringify({ items: Array.from({ length: 50 }, (_, i) => ({ id: i, name: `Product ${i}`, price: '9.99' })) }));

  it('makes br and gzip variants of a JSON 200 worth compressing, and every one says Vary: Accept-Encoding', async () => {
    const made = await representations(200, { 'content-type': 'application/json; charset=utf-8', etag: 'W/"7"' }, page, MAX_ENTRY_BYTES);
    expect(made.headers.vary).toBe('Accept-Encoding');
    expect(made.variants?.br?.headers).toMatchObject({ 'content-encoding': 'br', vary: 'Accept-Encoding', etag: 'W/"7"' });
    expect(made.variants?.gzip?.body.length).toBeLessThan(page.length);
  });

  it('leaves a small body, another status, another type or a strong ETag (a resource\'s version) as it is', async () => {
    expect((await representations(200, { 'content-type': 'application/json', etag: '"7"' }, page, MAX_ENTRY_BYTES)).variants).toBeUndefined();
    expect((await representations(200, { 'content-type': 'application/json' }, Buffer.from('{"id":1}'), MAX_ENTRY_BYTES)).variants).toBeUndefined();
    expect((await representations(404, { 'content-type': 'application/json' }, page, MAX_ENTRY_BYTES)).variants).toBeUndefined();
    expect((await representations(200, { 'content-type': 'image/png' }, page, MAX_ENTRY_BYTES)).variants).toBeUndefined();
  });

  it('passes a body over the largest entry on as it came: the same bytes, not compressed', async () => {
    const made = await representations(200, { 'content-type': 'application/json', 'content-length': String(page.length) }, page, page.length - 1);
    expect(made).toEqual({ status: 200, headers: { 'content-type': 'application/json' }, body: page });
    expect(made.body).toBe(page);
  });

  it('round-trips through the stored format, variants and all', async () => {
    const made = await representations(200, { 'content-type': 'application/json' }, page, MAX_ENTRY_BYTES);
    const stored = { generation: 'g', storedAt: 1, ...made };
    const back = decode(encode(stored));
    expect(back?.body.equals(page)).toBe(true);
    expect(back?.headers).toEqual(made.headers);
    for (const coding of ['br', 'gzip'] as const) {
      expect(back?.variants?.[coding]?.body.equals(made.variants![coding]!.body)).toBe(true);
      expect(back?.variants?.[coding]?.headers).toEqual(made.variants![coding]!.headers);
    }
  });
});
