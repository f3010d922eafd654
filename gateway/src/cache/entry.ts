import type { IncomingHttpHeaders } from 'node:http';
import { HOP_BY_HOP } from '../upstream.js';

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
}

/** The headers as `writeHead` takes them in one call: `[name, value, name, value, …]`. */
export function headerList(headers: Record<string, string>): string[] {
  const list: string[] = [];
  for (const name in headers) list.push(name, headers[name] as string);
  return list;
}

const NOT_STORED = new Set([...HOP_BY_HOP, 'date', 'x-request-id', 'content-length', 'age', 'x-cache', 'set-cookie']);

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

// Stored as one Redis string: a JSON line of metadata, then the body bytes as they came.
export function encode(entry: CachedResponse): Buffer {
  const meta = JSON.stringify({ g: entry.generation, t: entry.storedAt, s: entry.status, h: entry.headers });
  return Buffer.concat([Buffer.from(`${meta}\n`), entry.body]);
}

export function decode(stored: Buffer): CachedResponse | undefined {
  const newline = stored.indexOf(0x0a);
  if (newline < 0) return undefined;
  try {
    const meta = JSON.parse(stored.subarray(0, newline).toString()) as { g: string; t: number; s: number; h: Record<string, string> };
    return { generation: meta.g, storedAt: meta.t, status: meta.s, headers: meta.h, body: stored.subarray(newline + 1) };
  } catch {
    return undefined;
  }
}
