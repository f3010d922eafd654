import type { ServerResponse } from 'node:http';
import net from 'node:net';
import type { CachedResponse } from '../src/cache/entry.js';
import { cacheOutcomeHeader } from '../src/cache/outcome-header.js';
import type { CacheOutcome } from '../src/exchange.js';
import { rateLimitHeaders } from '../src/rate-limits/stage.js';
import { ResponseWriter } from '../src/respond.js';

/** A cached item as the unit tests of the cache and the response writer hold it: a strong ETag, a body with a newline. */
export const cachedItem: CachedResponse = {
  generation: 'g-7',
  storedAt: 1_700_000_000_000,
  status: 200,
  headers: { 'content-type': 'application/json', etag: '"v3"', 'cache-control': 'max-age=0' },
  body: Buffer.from('{"id":1}\n{"line":2}'),
};

/** What a stage wrote to a response: its status, headers and JSON body. */
export interface RecordedAnswer {
  status?: number;
  headers: Record<string, string>;
  body?: Record<string, unknown>;
}

/** A response that records what the response writer writes to it (a problem's JSON body, say). */
export function recordingResponse(): { res: ServerResponse; answer: RecordedAnswer } {
  const answer: RecordedAnswer = { headers: {} };
  const res = {
    statusCode: 200,
    headersSent: false,
    setHeader: (name: string, value: string) => void (answer.headers[name.toLowerCase()] = String(value)),
    hasHeader: (name: string) => name.toLowerCase() in answer.headers,
    end(body: string) {
      answer.status = res.statusCode;
      answer.body = JSON.parse(body) as Record<string, unknown>;
    },
  };
  return { res: res as unknown as ServerResponse, answer };
}

/** A TCP port on 127.0.0.1 nobody listens on now. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The response writer as the gateway makes it: with the rate limits' and the cache's headers, in the feature list's order. */
export const responseWriter = (countCacheOutcome: (outcome: CacheOutcome) => void = () => undefined): ResponseWriter =>
  new ResponseWriter([rateLimitHeaders, cacheOutcomeHeader(countCacheOutcome)]);
