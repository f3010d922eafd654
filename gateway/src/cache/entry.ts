import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { etagMatches } from '@app/shared/resource/rules';
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

/**
 * Answers a GET or HEAD from a response the gateway holds (from Redis, or fetched for the cache):
 * 304 when If-None-Match matches its ETag, no body for HEAD. The headers go out in one `writeHead`
 * (with `requestId`, when given, as `X-Request-Id`, and `more`): on a response nothing set headers on before,
 * Node then writes them without building its header map, as for a bare `node:http` server.
 */
export function sendHeld(
  request: { method?: string; headers: IncomingHttpHeaders },
  res: ServerResponse,
  held: Pick<CachedResponse, 'status' | 'headers' | 'body' | 'headerList'>,
  cache: { outcome: 'HIT' | 'MISS' | 'STALE'; ageSeconds?: number; requestId?: string; more?: Record<string, string> },
): void {
  const { etag } = held.headers;
  const notModified = held.status === 200 && etag !== undefined && etagMatches(request.headers['if-none-match'], etag, 'weak');
  const stored = held.headerList ?? headerList(held.headers);
  const headers = notModified ? stored.filter((_value, i) => stored[i - (i % 2)] !== 'content-type') : [...stored];
  headers.push('X-Cache', cache.outcome);
  if (cache.ageSeconds !== undefined) headers.push('Age', String(cache.ageSeconds));
  if (cache.requestId !== undefined) headers.push('X-Request-Id', cache.requestId);
  const { more } = cache;
  if (more) for (const name in more) headers.push(name, more[name] as string);
  if (notModified) {
    res.writeHead(304, headers).end();
    return;
  }
  headers.push('Content-Length', String(held.body.length));
  res.writeHead(held.status, headers);
  res.end(request.method === 'HEAD' ? undefined : held.body);
}
