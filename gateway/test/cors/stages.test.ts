import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createLogger } from '@app/shared/platform/logger';
import { requestTarget } from '@app/shared/platform/request-target';
import { Exchange } from '../../src/exchange.js';
import { responseWriter } from '../fixtures.js';
import { corsStages } from '../../src/cors/stages.js';

/** The CORS stages in process: the headers every response to an allowed origin gets, and the preflights answered. */
const logger = createLogger('cors-stage-test', 'silent');
const writer = responseWriter();
const ORIGIN = 'https://app.example.com';
// Made in each test rather than once, so that what they configure is run (and mutated) under a test.
const stages = () => corsStages(['https://other.example.com', ORIGIN], writer, EXPOSED.split(','));

const EXPOSED = 'ETag,Location,X-Request-Id,X-Cache,Age,Retry-After,RateLimit,RateLimit-Policy,WWW-Authenticate,Idempotent-Replayed';

/** A request, with a response that records the headers set on it and whether (and with what status) it was ended. */
function exchangeOf(method: string, url: string, requestHeaders: IncomingHttpHeaders = {}) {
  const req = { method, url, headers: requestHeaders, complete: true } as unknown as IncomingMessage;
  const answer: { status?: number; headers: Record<string, string> } = { headers: {} };
  const res = {
    statusCode: 200,
    headersSent: false,
    getHeader: (name: string) => answer.headers[name.toLowerCase()],
    setHeader: (name: string, value: string) => void (answer.headers[name.toLowerCase()] = String(value)),
    end() {
      answer.status = res.statusCode;
    },
  };
  const exchange = new Exchange(req, res as unknown as ServerResponse, requestTarget(url), undefined, { requestId: 'r-1', log: logger });
  return { exchange, answer };
}

const preflightOf = (origin: string | undefined, requestMethod: string | undefined) =>
  exchangeOf('OPTIONS', '/api/users', {
    ...(origin === undefined ? {} : { origin }),
    ...(requestMethod === undefined ? {} : { 'access-control-request-method': requestMethod }),
  });

describe('corsStages: headers', () => {
  it('gives a request from an allowed origin the CORS headers of an actual response, and passes it on', () => {
    const { headers } = stages();
    for (const method of ['GET', 'POST']) {
      const { exchange, answer } = exchangeOf(method, '/api/users', { origin: ORIGIN });
      expect(headers.run(exchange)).toBe(false);
      expect(answer).toEqual({ headers: { 'access-control-allow-origin': ORIGIN, vary: 'Origin', 'access-control-expose-headers': EXPOSED } });
      expect(exchange.preflight).toBe(false);
    }
  });

  it('allows no other origin, and says the answer varies by origin', () => {
    const { headers } = stages();
    const { exchange, answer } = exchangeOf('GET', '/api/users', { origin: 'https://evil.example.com' });
    expect(headers.run(exchange)).toBe(false);
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
    expect(answer.headers.vary).toBe('Origin');
  });

  it('marks a preflight from an allowed origin, to be answered after the rate limits, and writes nothing yet', () => {
    const { headers } = stages();
    const { exchange, answer } = preflightOf(ORIGIN, 'DELETE');
    expect(headers.run(exchange)).toBe(false);
    expect(exchange.preflight).toBe(true);
    expect(answer).toEqual({ headers: {} });
  });

  it('takes an OPTIONS that is no preflight of an allowed origin for a request like any other, untouched', () => {
    const { headers, preflight } = stages();
    for (const [origin, requestMethod] of [[ORIGIN, undefined], ['https://evil.example.com', 'DELETE'], [undefined, 'DELETE']] as const) {
      const { exchange, answer } = preflightOf(origin, requestMethod);
      expect(headers.run(exchange)).toBe(false);
      expect(exchange.preflight).toBe(false);
      expect(answer).toEqual({ headers: {} });
      expect(preflight.run(exchange)).toBe(false);
      expect(answer).toEqual({ headers: {} });
    }
  });
});

describe('corsStages: preflight', () => {
  it('answers a marked preflight 204 with what the origin may send, and the gateway’s own headers', () => {
    const { headers, preflight } = stages();
    const { exchange, answer } = preflightOf(ORIGIN, 'PATCH');
    headers.run(exchange);
    exchange.rateLimit = { 'RateLimit-Policy': '"read";q=5;w=60' };
    expect(preflight.run(exchange)).toBe(true);
    expect(answer).toEqual({
      status: 204,
      headers: {
        'x-request-id': 'r-1',
        'x-content-type-options': 'nosniff',
        'ratelimit-policy': '"read";q=5;w=60',
        'access-control-allow-origin': ORIGIN,
        vary: 'Origin',
        'access-control-allow-methods': 'GET,HEAD,POST,PUT,PATCH,DELETE',
        'access-control-allow-headers': 'Authorization,Content-Type,If-Match,If-None-Match,Idempotency-Key,X-Request-Id',
        'access-control-max-age': '600',
        'access-control-expose-headers': EXPOSED,
        'content-length': '0',
      },
    });
  });

  it('passes on a request that is not a marked preflight', () => {
    const { preflight } = stages();
    const { exchange, answer } = exchangeOf('GET', '/api/users', { origin: ORIGIN });
    expect(preflight.run(exchange)).toBe(false);
    expect(answer).toEqual({ headers: {} });
  });
});
