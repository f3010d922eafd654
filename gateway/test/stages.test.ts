import type { IncomingMessage } from 'node:http';
import { createLogger } from '@app/shared/platform/logger';
import { requestTarget } from '@app/shared/platform/request-target';
import { Exchange } from '../src/exchange.js';
import { RateLimits, type RateLimitOutcome } from '../src/rate-limits/budgets.js';
import { canonicalOnly } from '../src/routing/canonical-stage.js';
import { notFound } from '../src/routing/not-found-stage.js';
import { rateLimitStage } from '../src/rate-limits/stage.js';
import { recordingResponse, responseWriter } from './fixtures.js';

/** The small stages on their own: what each decides of a request, and what it answers. */
const logger = createLogger('stages-test', 'silent');
const writer = responseWriter();

/** A request from `address` (and the X-Forwarded-For it sends), with a response that records the problem written to it. */
function exchangeOf(method: string, url: string, options: { address?: string; forwardedFor?: string } = {}) {
  const headers: Record<string, string> = options.forwardedFor ? { 'x-forwarded-for': options.forwardedFor } : {};
  const req = { method, url, headers, socket: { remoteAddress: options.address ?? '10.0.0.1' }, complete: true } as unknown as IncomingMessage;
  const { res, answer } = recordingResponse();
  const exchange = new Exchange(req, res, requestTarget(url), undefined, { requestId: 'r-1', log: logger });
  return { exchange, answer };
}

describe('rateLimitStage', () => {
  const stage = (readsPerMinute: number, trustedProxyHops = 0) =>
    rateLimitStage({ limits: new RateLimits(undefined, { readsPerMinute, writesPerMinute: 1, keyPrefix: 'stages-test', leasePoints: 1 }, logger), trustedProxyHops, writer });

  it('passes a request within its budget on, with the RateLimit headers of its method’s budget', async () => {
    const limited = stage(5);
    const read = exchangeOf('GET', '/api/users');
    expect(await limited.run(read.exchange)).toBe(false);
    expect(read.exchange.rateLimit).toMatchObject({ 'RateLimit-Policy': '"read";q=5;w=60' });
    const write = exchangeOf('POST', '/api/users');
    expect(await limited.run(write.exchange)).toBe(false);
    expect(write.exchange.rateLimit).toMatchObject({ 'RateLimit-Policy': '"write";q=1;w=60' });
  });

  it('answers 429 with Retry-After beyond the budget', async () => {
    const limited = stage(1);
    await limited.run(exchangeOf('GET', '/api/users').exchange);
    const over = exchangeOf('GET', '/api/users');
    expect(await limited.run(over.exchange)).toBe(true);
    expect(over.answer.status).toBe(429);
    expect(over.answer.headers['retry-after']).toMatch(/^\d+$/);
    expect(over.answer.body?.detail).toBe(`Over the budget of read requests for this client; retry after ${over.answer.headers['retry-after']} s`);
  });

  it('never counts the probes, but counts the gateway’s other endpoints', async () => {
    const limited = stage(1);
    for (let i = 0; i < 3; i++) expect(await limited.run(exchangeOf('GET', '/healthz').exchange)).toBe(false);
    expect(await limited.run(exchangeOf('GET', '/openapi.json').exchange)).toBe(false);
    expect(await limited.run(exchangeOf('GET', '/openapi.json').exchange)).toBe(true);
  });

  it('counts a caller by its verified subject, else its address, as the trusted hops name it', async () => {
    const trusting = stage(1, 1);
    expect(await trusting.run(exchangeOf('GET', '/api/users', { forwardedFor: '192.0.2.1' }).exchange)).toBe(false);
    expect(await trusting.run(exchangeOf('GET', '/api/users', { forwardedFor: '192.0.2.2' }).exchange)).toBe(false);
    expect(await trusting.run(exchangeOf('GET', '/api/users', { forwardedFor: '192.0.2.1' }).exchange)).toBe(true);
    const subject = exchangeOf('GET', '/api/users', { forwardedFor: '192.0.2.1' });
    subject.exchange.caller = 'sub:alice';
    expect(await trusting.run(subject.exchange)).toBe(false);
    // No hop trusted: the forwarded address is the client's own word, and the socket's address counts.
    const trustingNone = stage(1, 0);
    expect(await trustingNone.run(exchangeOf('GET', '/api/users', { forwardedFor: '192.0.2.1' }).exchange)).toBe(false);
    const other = exchangeOf('GET', '/api/users', { forwardedFor: '192.0.2.2' });
    expect(await trustingNone.run(other.exchange)).toBe(true);
    expect(other.exchange.caller).toBe('addr:10.0.0.1');
  });

  it('trusts only as many proxies as it is told: the address the last trusted one names is the caller', async () => {
    const chain = exchangeOf('GET', '/api/users', { forwardedFor: '198.51.100.7, 192.0.2.1' });
    expect(await stage(1, 1).run(chain.exchange)).toBe(false);
    expect(chain.exchange.caller).toBe('addr:192.0.2.1');
    const deeper = exchangeOf('GET', '/api/users', { forwardedFor: '198.51.100.7, 192.0.2.1' });
    expect(await stage(1, 2).run(deeper.exchange)).toBe(false);
    expect(deeper.exchange.caller).toBe('addr:198.51.100.7');
  });

  it('answers 503 for a budget that cannot be counted now', async () => {
    const uncounted: RateLimitOutcome = { allowed: false, uncounted: true, headers: { 'RateLimit-Policy': '"read";q=5;w=60', 'Retry-After': '1' } };
    const limited = rateLimitStage({ limits: { consume: () => uncounted } as unknown as RateLimits, trustedProxyHops: 0, writer });
    const refused = exchangeOf('GET', '/api/users');
    expect(await limited.run(refused.exchange)).toBe(true);
    expect(refused.answer.status).toBe(503);
    expect(refused.answer.headers['retry-after']).toBe('1');
    expect(refused.answer.body?.detail).toBe('The read budget of this client cannot be counted now; retry after 1 s');
    // Let through when the limiter could not say (no Retry-After): the policy still stated.
    const letThrough = rateLimitStage({ limits: { consume: async () => ({ allowed: false, headers: {} }) } as unknown as RateLimits, trustedProxyHops: 0, writer });
    expect(await letThrough.run(exchangeOf('GET', '/api/users').exchange)).toBe(false);
  });
});

describe('canonicalOnly and notFound', () => {
  it('answers 404 for a target with no canonical form, and passes a canonical one on', () => {
    const odd = exchangeOf('GET', '/api/Users');
    expect(canonicalOnly(writer).run(odd.exchange)).toBe(true);
    expect(odd.answer).toMatchObject({ status: 404, body: { detail: 'No resource at this path: it is not in its canonical form', instance: '/api/Users' } });
    expect(canonicalOnly(writer).run(exchangeOf('GET', '/api/users').exchange)).toBe(false);
  });

  it('answers 404 naming the method and path no service serves', () => {
    const missing = exchangeOf('DELETE', '/api/orders');
    expect(notFound(writer).run(missing.exchange)).toBe(true);
    expect(missing.answer).toMatchObject({ status: 404, body: { detail: 'No route for DELETE /api/orders' } });
    // A request without a method is read as a GET.
    const bare = exchangeOf('GET', '/api/orders');
    delete bare.exchange.req.method;
    notFound(writer).run(bare.exchange);
    expect(bare.answer.body?.detail).toBe('No route for GET /api/orders');
  });
});
