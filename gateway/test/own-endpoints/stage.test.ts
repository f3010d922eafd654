import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { createLogger } from '@app/shared/platform/logger';
import { requestTarget } from '@app/shared/platform/request-target';
import { Exchange } from '../../src/exchange.js';
import { responseWriter } from '../fixtures.js';
import { ownEndpoints } from '../../src/own-endpoints/stage.js';

/** The stage that hands every request outside /api to the gateway's own express app. */
const logger = createLogger('own-endpoints-stage-test', 'silent');
const writer = responseWriter();

/** A request, with a response that records the headers set on it. */
function exchangeOf(method: string, url: string) {
  const req = { method, url, headers: {}, complete: true } as unknown as IncomingMessage;
  const headers: Record<string, string> = {};
  const res = { setHeader: (name: string, value: string) => void (headers[name.toLowerCase()] = String(value)) };
  const exchange = new Exchange(req, res as unknown as ServerResponse, requestTarget(url), undefined, { requestId: 'r-1', log: logger });
  return { exchange, headers };
}

/** An app that records the requests it was handed, and the headers their responses had by then. */
function app() {
  const handed: { req: IncomingMessage; res: ServerResponse; headers: Record<string, string> }[] = [];
  const listener = (headers: () => Record<string, string>): RequestListener => (req, res) => void handed.push({ req, res, headers: { ...headers() } });
  return { handed, listener };
}

describe('ownEndpoints', () => {
  it('hands a request outside /api to the app, with the gateway’s own headers already set', () => {
    for (const url of ['/healthz', '/openapi.json', '/docs/']) {
      const { exchange, headers } = exchangeOf('GET', url);
      const { handed, listener } = app();
      exchange.rateLimit = { RateLimit: '"read";r=9;t=60' };
      expect(ownEndpoints(listener(() => headers), writer).run(exchange)).toBe(true);
      expect(handed).toEqual([{ req: exchange.req, res: exchange.res, headers: expect.objectContaining({ 'x-request-id': 'r-1', ratelimit: '"read";r=9;t=60' }) }]);
    }
  });

  it('passes on every request under /api, canonical or not, and sets nothing', () => {
    for (const url of ['/api/users', '/api/Users', '/api']) {
      const { exchange, headers } = exchangeOf('GET', url);
      const { handed, listener } = app();
      expect(ownEndpoints(listener(() => headers), writer).run(exchange)).toBe(false);
      expect(handed).toEqual([]);
      expect(headers).toEqual({});
    }
  });
});
