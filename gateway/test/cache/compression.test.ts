import { randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import { BROTLI_QUALITY, COMPRESSION_THRESHOLD_BYTES, compressor, compressVariants, GZIP_LEVEL, isCompressible, negotiateCoding, variantHeaders } from '../../src/cache/compression.js';

const both = { br: true, gzip: true };

describe('negotiateCoding', () => {
  it('sends identity to a client that asks for no coding (no header, an empty one)', () => {
    expect(negotiateCoding(undefined, both)).toBe('identity');
    expect(negotiateCoding('', both)).toBe('identity');
  });

  it('prefers br, then gzip, when the client likes several alike (whatever its order)', () => {
    expect(negotiateCoding('gzip, deflate, br, zstd', both)).toBe('br');
    expect(negotiateCoding('gzip, deflate', both)).toBe('gzip');
    expect(negotiateCoding('br', both)).toBe('br');
    expect(negotiateCoding('BR', both)).toBe('br');
  });

  it('follows q-values', () => {
    expect(negotiateCoding('br;q=0.5, gzip;q=0.8', both)).toBe('gzip');
    expect(negotiateCoding('br;q=0, gzip', both)).toBe('gzip');
    expect(negotiateCoding('gzip;q=0.4, identity;q=0.9', both)).toBe('identity');
    expect(negotiateCoding('br;q=0.001', both)).toBe('br');
  });

  it('reads * as every coding not named, and a named q over *', () => {
    expect(negotiateCoding('*', both)).toBe('br');
    expect(negotiateCoding('br;q=0, *', both)).toBe('gzip');
    expect(negotiateCoding('*;q=0, gzip', both)).toBe('gzip');
  });

  it('answers without a coding when nothing acceptable is available (RFC 9110: rather than 406)', () => {
    expect(negotiateCoding('deflate', both)).toBe('identity');
    expect(negotiateCoding('identity;q=0, deflate', both)).toBe('identity');
    expect(negotiateCoding('*;q=0', both)).toBe('identity');
  });

  it('chooses among the variants the entry has', () => {
    expect(negotiateCoding('br, gzip', { gzip: true })).toBe('gzip');
    expect(negotiateCoding('br', { gzip: true })).toBe('identity');
    expect(negotiateCoding('br, gzip', {})).toBe('identity');
  });

  it('reads a header sent several times as one list', () => {
    expect(negotiateCoding(['gzip;q=0.5', 'br'], both)).toBe('br');
  });

  it('gives the same answer for a value met before (the memo) and past the memo size', () => {
    for (let i = 0; i < 600; i++) expect(negotiateCoding(`gzip;q=0.${(i % 9) + 1}, x-made-up-${i}`, both)).toBe('gzip');
    expect(negotiateCoding('gzip, deflate, br, zstd', both)).toBe('br');
    expect(negotiateCoding('br;q=0, gzip', both)).toBe('gzip');
  });
});

describe('isCompressible', () => {
  const json = { 'content-type': 'application/json; charset=utf-8' };

  it('takes JSON and text from the threshold on', () => {
    expect(isCompressible(json, COMPRESSION_THRESHOLD_BYTES)).toBe(true);
    expect(isCompressible(json, COMPRESSION_THRESHOLD_BYTES - 1)).toBe(false);
    expect(isCompressible({ 'content-type': 'application/problem+json' }, 5_000)).toBe(true);
    expect(isCompressible({ 'content-type': 'text/html; charset=utf-8' }, 5_000)).toBe(true);
  });

  it('leaves other types, coded bodies and no-transform alone', () => {
    expect(isCompressible({ 'content-type': 'image/png' }, 5_000)).toBe(false);
    expect(isCompressible({ 'content-type': 'application/jsonp' }, 5_000)).toBe(false);
    expect(isCompressible({}, 5_000)).toBe(false);
    expect(isCompressible({ ...json, 'content-encoding': 'gzip' }, 5_000)).toBe(false);
    expect(isCompressible({ ...json, 'content-encoding': 'identity' }, 5_000)).toBe(true);
    expect(isCompressible({ ...json, 'cache-control': 'max-age=60, no-transform' }, 5_000)).toBe(false);
    expect(isCompressible({ ...json, 'cache-control': 'no-cache' }, 5_000)).toBe(true);
  });

  it('reads no-transform anywhere in Cache-Control, however it is spaced', () => {
    for (const cacheControl of ['no-transform', 'max-age=60,no-transform', 'no-transform , max-age=60', 'NO-TRANSFORM']) {
      expect(isCompressible({ ...json, 'cache-control': cacheControl }, 5_000)).toBe(false);
    }
    expect(isCompressible({ ...json, 'cache-control': 'no-transformer' }, 5_000)).toBe(true);
  });

  it('reads the media type at the start of Content-Type only', () => {
    expect(isCompressible({ 'content-type': 'multipart/mixed; boundary=application/json' }, 5_000)).toBe(false);
  });
});

describe('compressVariants', () => {
  const list = Buffer.from(
    JSON.stringify({
      items: Array.from({ length: 200 }, (_, i) => ({ id: `0190c3a5-7d1e-7000-8000-${String(i).padStart(12, '0')}`, sku: `SKU-${i}`, name: `Product ${i}`, stock: i })),
      nextCursor: null,
    }),
  );

  it('makes br and gzip variants that decode to the body, far smaller than it', async () => {
    const variants = await compressVariants(list);
    expect(zlib.brotliDecompressSync(variants.br!).equals(list)).toBe(true);
    expect(zlib.gunzipSync(variants.gzip!).equals(list)).toBe(true);
    expect(variants.br!.length).toBeLessThan(list.length * 0.2);
    expect(variants.gzip!.length).toBeLessThan(list.length * 0.3);
  });

  it('compresses at the fast settings it states (BROTLI_QUALITY, GZIP_LEVEL)', async () => {
    const variants = await compressVariants(list);
    expect(variants.br!.equals(zlib.brotliCompressSync(list, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } }))).toBe(true);
    expect(variants.gzip!.equals(zlib.gzipSync(list, { level: GZIP_LEVEL }))).toBe(true);
  });

  it('compresses a stream into either coding, the very bytes of the variants the cache keeps', async () => {
    const variants = await compressVariants(list);
    for (const [coding, decode] of [['br', zlib.brotliDecompressSync], ['gzip', zlib.gunzipSync]] as const) {
      const stream = compressor(coding);
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      const ended = new Promise((resolve) => stream.on('end', resolve));
      stream.end(list);
      await ended;
      expect(decode(Buffer.concat(chunks)).equals(list)).toBe(true);
      expect(Buffer.concat(chunks).equals(variants[coding]!)).toBe(true);
      // Each coding's own format: the other's decoder refuses it.
      expect(() => (coding === 'br' ? zlib.gunzipSync : zlib.brotliDecompressSync)(Buffer.concat(chunks))).toThrow();
    }
  });

  it('leaves out a variant no smaller than the body', async () => {
    const variants = await compressVariants(randomBytes(2_000));
    expect(variants).toEqual({});
  });

  it('leaves out a variant exactly as long as the body: it would save nothing', async () => {
    // Noise (xorshift, the same every run) after ever more 'a's: each coding's output, longer than
    // the body at first, meets the body's length at some run.
    const noise = Buffer.alloc(2_000);
    for (let i = 0, x = 1; i < noise.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      noise[i] = x & 0xff;
    }
    const bodies = Array.from({ length: 300 }, (_, run) => Buffer.concat([Buffer.alloc(run, 'a'), noise]));
    const compressed = { br: (body: Buffer) => zlib.brotliCompressSync(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } }), gzip: (body: Buffer) => zlib.gzipSync(body, { level: GZIP_LEVEL }) };
    for (const coding of ['br', 'gzip'] as const) {
      const asLong = bodies.find((body) => compressed[coding](body).length === body.length);
      expect(asLong).toBeDefined();
      expect((await compressVariants(asLong!))[coding]).toBeUndefined();
    }
  });

  it('compresses off the event loop: a callback queued before it runs before it is done', async () => {
    // 4 MB of text, as a page of 200 long descriptions: compressed on the loop, it would be done
    // (and its promise settled) before the loop's next turn.
    const large = Buffer.from(JSON.stringify({ items: Array.from({ length: 800 }, (_, i) => ({ id: i, description: `Product ${i} `.repeat(400) })) }));
    let compressed = false;
    const compressing = compressVariants(large).then((variants) => {
      compressed = true;
      return variants;
    });
    const doneAtNextTurn = await new Promise<boolean>((resolve) => setImmediate(() => resolve(compressed)));
    expect(doneAtNextTurn).toBe(false);
    expect(zlib.gunzipSync((await compressing).gzip!).equals(large)).toBe(true);
  });
});

describe('variantHeaders', () => {
  const stored = { 'content-type': 'application/json', etag: '"7"', 'cache-control': 'no-cache' };

  it('marks a compressed variant: its coding, Vary, and a weak ETag', () => {
    expect(variantHeaders(stored, 'br')).toEqual({ ...stored, 'content-encoding': 'br', vary: 'Accept-Encoding', etag: 'W/"7"' });
    expect(variantHeaders({ ...stored, etag: 'W/"7"' }, 'gzip').etag).toBe('W/"7"');
  });

  it('keeps the identity variant as it is, saying it varies', () => {
    expect(variantHeaders(stored, 'identity')).toEqual({ ...stored, vary: 'Accept-Encoding' });
    // An explicit identity coding is no coding: it is left out.
    expect(variantHeaders({ ...stored, 'content-encoding': 'identity' }, 'identity')).toEqual({ ...stored, vary: 'Accept-Encoding' });
  });

  it('adds Accept-Encoding to a Vary of its own, once', () => {
    expect(variantHeaders({ ...stored, vary: 'Origin' }, 'gzip').vary).toBe('Origin, Accept-Encoding');
    expect(variantHeaders({ ...stored, vary: 'origin, accept-encoding' }, 'gzip').vary).toBe('origin, accept-encoding');
    expect(variantHeaders({ ...stored, vary: '*' }, 'gzip').vary).toBe('*');
    expect(variantHeaders({ ...stored, vary: ' ' }, 'gzip').vary).toBe('Accept-Encoding');
  });

  it('leaves no Content-Length (it is the variant body’s)', () => {
    expect(variantHeaders({ ...stored, 'content-length': '5000' }, 'br')).not.toHaveProperty('content-length');
  });
});
