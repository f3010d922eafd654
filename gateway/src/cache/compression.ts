import { promisify } from 'node:util';
import zlib from 'node:zlib';
import Negotiator from 'negotiator';

/**
 * Compressed variants of a cached response: which coding a client gets (`negotiateCoding`), whether
 * a response is worth compressing (`isCompressible`), its variants made once per entry
 * (`compressVariants`, in libuv's thread pool), and the headers each variant goes out with
 * (`variantHeaders`). No I/O, nothing kept per request but the memo of Accept-Encoding values.
 */

/** The content codings the gateway makes, in the order it prefers them when a client likes several alike. */
export const CONTENT_CODINGS = ['br', 'gzip'] as const;
export type ContentCoding = (typeof CONTENT_CODINGS)[number];
export type Coding = ContentCoding | 'identity';

/**
 * Bodies smaller than this go out as they are: a compressed frame's overhead and a second header
 * buy nothing at the size of one item (about 250 bytes), and a JSON list of a few items is already
 * past it.
 */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

/**
 * Brotli's quality and gzip's level: the fastest whose page of 200 products comes out well under a
 * fifth of its size (bench/compression.ts; figures in docs/benchmarks/). Higher ones cost two to
 * five times the CPU time to save a few hundred bytes of about 6 KB.
 */
export const BROTLI_QUALITY = 1;
export const GZIP_LEVEL = 1;

const PREFERENCE: readonly Coding[] = [...CONTENT_CODINGS, 'identity'];

/** negotiator 1's `encodings` with its `preferred` option, which its type declarations (written for 0.6) omit. */
type Encodings = (available: readonly string[], options: { preferred: readonly string[] }) => string[];

/**
 * The codings a client takes (RFC 9110 §12.5.3: q-values, `*`, `identity`), best first, by its
 * Accept-Encoding. Ties go to the gateway's order (br, gzip, identity): a browser sends `gzip,
 * deflate, br, zstd`, all alike. None acceptable (`identity;q=0` and nothing the gateway makes) is
 * answered without a coding, as RFC 9110 advises rather than a 406. No header, or an empty one,
 * takes identity only.
 */
function rankCodings(acceptEncoding: string): readonly Coding[] {
  const negotiator = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } });
  const ranked = (negotiator.encodings.bind(negotiator) as Encodings)(PREFERENCE, { preferred: PREFERENCE }) as Coding[];
  return ranked.length > 0 ? ranked : ['identity'];
}

/**
 * Rankings by Accept-Encoding value. Clients send a handful of distinct values, so a hit costs one
 * map lookup, not a parse; a flood of made-up values empties the memo when it is full, so it never
 * grows past MEMO_SIZE.
 */
const MEMO_SIZE = 256;
const ranking = new Map<string, readonly Coding[]>();
const IDENTITY_ONLY: readonly Coding[] = ['identity'];

/**
 * The coding of the variant to send a client whose Accept-Encoding is `acceptEncoding`, among
 * `available` (the variants an entry has; identity is always there).
 */
export function negotiateCoding(acceptEncoding: string | readonly string[] | undefined, available: Readonly<Partial<Record<ContentCoding, unknown>>>): Coding {
  if (acceptEncoding === undefined || acceptEncoding === '') return 'identity';
  const value = typeof acceptEncoding === 'string' ? acceptEncoding : acceptEncoding.join(', ');
  let ranked = ranking.get(value);
  if (ranked === undefined) {
    if (ranking.size >= MEMO_SIZE) ranking.clear();
    ranked = value.length > 0 ? rankCodings(value) : IDENTITY_ONLY;
    ranking.set(value, ranked);
  }
  for (const coding of ranked) if (coding === 'identity' || available[coding] !== undefined) return coding;
  return 'identity';
}

// JSON (application/json, application/problem+json, any +json) and text: what compresses well.
const COMPRESSIBLE_TYPE = /^(?:application\/(?:[\w.+-]+\+)?json|text\/[\w.+-]+)\s*(?:;|$)/i;

/**
 * Whether a response is worth compressed variants: a compressible type, a body of at least
 * COMPRESSION_THRESHOLD_BYTES, no coding of its own, no strong ETag (a resource's version, which
 * conditional writes compare byte for byte), and no `Cache-Control: no-transform` (RFC 9111
 * §5.2.2.6: a proxy must not change its coding then).
 */
export function isCompressible(headers: Readonly<Record<string, string | undefined>>, bodyBytes: number): boolean {
  if (bodyBytes < COMPRESSION_THRESHOLD_BYTES) return false;
  // A strong ETag names these very bytes, and clients send it back in If-Match (strong comparison):
  // a compressed variant would need one of its own that the service does not know.
  const { etag } = headers;
  if (etag !== undefined && !etag.startsWith('W/')) return false;
  const contentEncoding = headers['content-encoding'];
  if (contentEncoding !== undefined && contentEncoding.toLowerCase() !== 'identity') return false;
  if (/(?:^|,)\s*no-transform\s*(?:,|$)/i.test(headers['cache-control'] ?? '')) return false;
  return COMPRESSIBLE_TYPE.test(headers['content-type'] ?? '');
}

const BROTLI_PARAMS = { [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY, [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT };

const brotliCompress = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

/**
 * `body` compressed into each coding, once per cache entry, in libuv's thread pool (zlib's async
 * API): the event loop answers other requests meanwhile, however large the body. A variant no
 * smaller than the body is left out: it would cost the client decoding for nothing.
 */
export async function compressVariants(body: Buffer): Promise<Partial<Record<ContentCoding, Buffer>>> {
  const [br, gzipped] = await Promise.all([
    brotliCompress(body, { params: { ...BROTLI_PARAMS, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length } }),
    gzip(body, { level: GZIP_LEVEL }),
  ]);
  const variants: Partial<Record<ContentCoding, Buffer>> = {};
  if (br.length < body.length) variants.br = br;
  if (gzipped.length < body.length) variants.gzip = gzipped;
  return variants;
}

/** `vary` with Accept-Encoding among its fields (once); `*` already varies on everything. */
function varyOnAcceptEncoding(vary: string | undefined): string {
  if (vary === undefined || vary.trim() === '') return 'Accept-Encoding';
  const fields = vary.split(',').map((field) => field.trim().toLowerCase());
  return fields.includes('*') || fields.includes('accept-encoding') ? vary : `${vary}, Accept-Encoding`;
}

/**
 * The headers (lower-case names) a variant of a compressible response goes out with: every variant,
 * identity included, says `Vary: Accept-Encoding` (a shared cache must not give one client's
 * variant to another); a compressed one says its `Content-Encoding`, and its ETag is weak. A strong
 * ETag promises the same bytes (RFC 9110 §8.8.1), and the br, gzip and identity bytes differ; a
 * weak one still matches If-None-Match (weak comparison), so revalidation keeps working across
 * variants. Content-Length is the writer's: it depends on the variant's body.
 */
export function variantHeaders(headers: Readonly<Record<string, string>>, coding: Coding): Record<string, string> {
  const result: Record<string, string> = { ...headers, vary: varyOnAcceptEncoding(headers.vary) };
  delete result['content-length'];
  if (coding === 'identity') {
    delete result['content-encoding'];
    return result;
  }
  result['content-encoding'] = coding;
  const { etag } = headers;
  if (etag !== undefined && !etag.startsWith('W/')) result.etag = `W/${etag}`;
  return result;
}

/** A stream that compresses into `coding`, at the same settings as the variants the cache keeps. */
export function compressor(coding: ContentCoding): zlib.BrotliCompress | zlib.Gzip {
  return coding === 'br' ? zlib.createBrotliCompress({ params: BROTLI_PARAMS }) : zlib.createGzip({ level: GZIP_LEVEL });
}
