import type { IncomingHttpHeaders } from 'node:http';
import { CACHE_OUTCOME_FIELD, REQUEST_ID_FIELD } from '@app/shared/platform/http/headers';
import { NOSNIFF } from '@app/shared/platform/http/responses';
import { HOP_BY_HOP } from '../proxy/upstream.js';
import { compressVariants, CONTENT_CODINGS, isCompressible, variantHeaders, type ContentCoding } from './compression.js';

/** One representation of a response: its headers and body, and its header list once made. */
export interface Representation {
  headers: Record<string, string>;
  body: Buffer;
  /** `headers` as `[name, value, …]`, made once for an entry held in memory (see `headerList`). */
  headerList?: readonly string[];
}

/** A response's compressed variants (compression.ts), made once when it is fetched; none when it is not worth it. */
export type Variants = Partial<Record<ContentCoding, Representation>>;

/** A response as the cache keeps it. */
export interface CachedResponse {
  /** The generation it was fetched under: valid only while that is still current. */
  generation: string;
  /** When it was fetched (ms since the epoch). */
  storedAt: number;
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** `headers` as `[name, value, …]`, made once for an entry held in memory (see `headerList`). */
  headerList?: readonly string[];
  variants?: Variants;
}

/**
 * A fetched response as the gateway keeps and sends it: its storable headers, and for a 200 worth
 * compressing, its br and gzip variants, made here once for every client and every hit (the
 * identity one then says `Vary: Accept-Encoding` too). A body over `maxEntryBytes` is passed on as
 * it came, never compressed: it is too large to keep (the cache does not store it), so compressing
 * it would be paid again on every read.
 */
export async function representations(
  status: number,
  headers: IncomingHttpHeaders,
  body: Buffer,
  maxEntryBytes: number,
): Promise<Pick<CachedResponse, 'status' | 'headers' | 'body' | 'variants'>> {
  const storable = storableHeaders(headers);
  if (status !== 200 || body.length > maxEntryBytes || !isCompressible(storable, body.length)) return { status, headers: storable, body };
  const compressed = await compressVariants(body);
  let variants: Variants | undefined;
  for (const coding of CONTENT_CODINGS) {
    const variant = compressed[coding];
    if (variant) (variants ??= {})[coding] = { headers: variantHeaders(storable, coding), body: variant };
  }
  return variants ? { status, headers: variantHeaders(storable, 'identity'), body, variants } : { status, headers: storable, body };
}

/** The headers as `writeHead` takes them in one call: `[name, value, name, value, …]`. */
export function headerList(headers: Record<string, string>): string[] {
  const list: string[] = [];
  for (const name in headers) list.push(name, headers[name] as string);
  return list;
}

// The gateway's own headers (respond.ts) are added to every answer, not kept.
const NOT_STORED = new Set([...HOP_BY_HOP, 'date', REQUEST_ID_FIELD, NOSNIFF[0].toLowerCase(), 'content-length', 'age', CACHE_OUTCOME_FIELD, 'set-cookie']);

export function storableHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === 'string' && !NOT_STORED.has(name)) kept[name] = value;
  }
  return kept;
}

/** May a response be stored at all (RFC 9111: never `no-store`/`private`, never a `Set-Cookie`)? */
export function isStorable(status: number, headers: IncomingHttpHeaders): boolean {
  const cacheControl = headers['cache-control'] ?? '';
  return status === 200 && headers['set-cookie'] === undefined && !/\b(no-store|private)\b/i.test(cacheControl);
}

// Stored as one Redis string: a JSON line of metadata, then the body bytes as they came, then each
// compressed variant's bytes (their lengths in the metadata; their headers follow from the body's).
export function encode(entry: CachedResponse): Buffer {
  const lengths: Partial<Record<ContentCoding, number>> = {};
  const parts: Buffer[] = [entry.body];
  for (const coding of CONTENT_CODINGS) {
    const variant = entry.variants?.[coding];
    if (variant) {
      lengths[coding] = variant.body.length;
      parts.push(variant.body);
    }
  }
  const meta = JSON.stringify({ g: entry.generation, t: entry.storedAt, s: entry.status, h: entry.headers, ...(parts.length > 1 ? { v: lengths } : {}) });
  return Buffer.concat([Buffer.from(`${meta}\n`), ...parts]);
}

export function decode(stored: Buffer): CachedResponse | undefined {
  const newline = stored.indexOf(0x0a);
  if (newline < 0) return undefined;
  let meta: { g: string; t: number; s: number; h: Record<string, string>; v?: Partial<Record<ContentCoding, number>> };
  try {
    meta = JSON.parse(stored.subarray(0, newline).toString()) as typeof meta;
  } catch {
    return undefined;
  }
  const compressedBytes = CONTENT_CODINGS.reduce((sum, coding) => sum + (meta.v?.[coding] ?? 0), 0);
  let offset = stored.length - compressedBytes;
  if (offset <= newline) return undefined;
  const entry: CachedResponse = { generation: meta.g, storedAt: meta.t, status: meta.s, headers: meta.h, body: stored.subarray(newline + 1, offset) };
  for (const coding of CONTENT_CODINGS) {
    const length = meta.v?.[coding];
    if (length === undefined) continue;
    (entry.variants ??= {})[coding] = { headers: variantHeaders(meta.h, coding), body: stored.subarray(offset, offset + length) };
    offset += length;
  }
  return entry;
}
