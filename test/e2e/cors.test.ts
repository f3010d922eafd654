/**
 * Browsers: a page from an allowed origin calls the API through the gateway (preflight answered by
 * the gateway, the headers a script needs exposed); a page from another origin is refused by the
 * browser. Headless Chromium (Debian's package, which `npm test` installs where it can) driven by playwright-core; the
 * pages are served from two localhost ports, which are two origins.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { findOneOf } from '../../scripts/setup/machine.ts';
import { defaultToken } from '../support/auth.js';
import { capturingLogger, startGateway, startStack } from '../support/stack.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? findOneOf(['chromium', 'chromium-browser']) ?? 'chromium';
const PAGE = '<!doctype html><title>API client</title>';

/** A server of one empty page: its origin is http://127.0.0.1:<port>. */
async function pageServer() {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((resolve) => server.close(resolve)) };
}

let allowed: Awaited<ReturnType<typeof pageServer>>;
let other: Awaited<ReturnType<typeof pageServer>>;
let stack: Awaited<ReturnType<typeof startStack>>;
let browser: Browser;

beforeAll(async () => {
  [allowed, other] = await Promise.all([pageServer(), pageServer()]);
  stack = await startStack({ guard: { corsOrigins: [allowed.origin] } });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
  await Promise.all([allowed?.close(), other?.close()]);
});

/** What a script on a page from `origin` gets when it creates a user through the gateway. */
async function createUserFrom(origin: string) {
  const page = await browser.newPage();
  try {
    await page.goto(`${origin}/`);
    return await page.evaluate(
      async ({ gateway, token, email }) => {
        try {
          const response = await fetch(`${gateway}/api/users`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ email, name: 'From A Browser' }),
          });
          const names = ['etag', 'location', 'x-request-id', 'ratelimit', 'ratelimit-policy'];
          return { status: response.status, headers: Object.fromEntries(names.map((name) => [name, response.headers.get(name)])), body: await response.json() };
        } catch (error) {
          return { error: String(error) };
        }
      },
      { gateway: stack.gateway.url, token: defaultToken, email: `browser-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com` },
    );
  } finally {
    await page.close();
  }
}

describe('a page in a browser', () => {
  it('on an allowed origin can call the API and read ETag, Location, X-Request-Id and the RateLimit headers', async () => {
    const result = await createUserFrom(allowed.origin);
    expect(result).toMatchObject({ status: 201, body: { name: 'From A Browser' } });
    const { headers } = result as { headers: Record<string, string | null> };
    expect(headers.etag).toBe('"1"');
    expect(headers.location).toMatch(/^\/api\/users\//);
    expect(headers['x-request-id']).toMatch(/^[A-Za-z0-9._-]+$/);
    expect(headers['ratelimit-policy']).toMatch(/^"write";q=\d+;w=60$/);
    expect(headers.ratelimit).toMatch(/^"write";r=\d+;t=\d+$/);
  });

  it('on an allowed origin can retry a POST with an Idempotency-Key and read Idempotent-Replayed', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${allowed.origin}/`);
      const answers = await page.evaluate(
        async ({ gateway, token, email, key }) => {
          const post = () =>
            fetch(`${gateway}/api/users`, {
              method: 'POST',
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key },
              body: JSON.stringify({ email, name: 'Retried From A Browser' }),
            }).then(async (response) => ({ status: response.status, replayed: response.headers.get('idempotent-replayed'), location: response.headers.get('location') }), (error: unknown) => ({ error: String(error) }));
          return [await post(), await post()];
        },
        { gateway: stack.gateway.url, token: defaultToken, email: `browser-retry-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com`, key: `browser-${Math.random().toString(36).slice(2)}` },
      );
      expect(answers[0]).toEqual({ status: 201, replayed: null, location: expect.stringMatching(/^\/api\/users\//) });
      expect(answers[1]).toEqual({ status: 201, replayed: 'true', location: (answers[0] as { location: string }).location });
    } finally {
      await page.close();
    }
  });

  it('on another origin is refused by the browser', async () => {
    expect(await createUserFrom(other.origin)).toEqual({ error: expect.stringMatching(/TypeError: Failed to fetch/) });
  });
});

/** An OPTIONS request as a browser (or anyone) sends it. */
function options(headers: http.OutgoingHttpHeaders, path = '/api/users', url = stack.gateway.url): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const request = http.request({ host: hostname, port, path, method: 'OPTIONS', headers });
    request.once('response', (response) => {
      response.resume();
      resolve({ status: response.statusCode!, headers: response.headers });
    });
    request.once('error', reject);
    request.end();
  });
}

/** A raw preflight, as a browser sends it. */
const preflight = (origin: string, path?: string, url?: string) =>
  options({ origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' }, path, url);

describe('preflights', () => {
  it('are answered by the gateway, without a token, allowing the methods and headers the API uses', async () => {
    const { status, headers } = await preflight(allowed.origin);
    expect(status).toBe(204);
    expect(headers['access-control-allow-origin']).toBe(allowed.origin);
    expect(headers['access-control-allow-methods']).toBe('GET,HEAD,POST,PUT,PATCH,DELETE');
    expect(headers['access-control-allow-headers']).toMatch(/Authorization/);
    expect(headers['x-request-id']).toBeDefined();
  });

  it('from another origin get no CORS headers', async () => {
    const { headers } = await preflight(other.origin);
    expect(headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('any other OPTIONS goes through the rules it meets without CORS', () => {
  it('an unknown path is a 404, a known one a 204 with Allow, both with a request id', async () => {
    const unknown = await options({ origin: allowed.origin }, '/api/nope');
    expect({ status: unknown.status, requestId: unknown.headers['x-request-id'] !== undefined }).toEqual({ status: 404, requestId: true });
    const known = await options({}, '/api/users');
    expect({ status: known.status, allow: known.headers.allow, requestId: known.headers['x-request-id'] !== undefined }).toEqual({ status: 204, allow: 'GET, HEAD, POST, OPTIONS', requestId: true });
    // A preflight from an origin that is not allowed is an OPTIONS like any other.
    expect((await preflight(other.origin, '/api/nope')).status).toBe(404);
  });

  it('a garbage token is a 401', async () => {
    const response = await options({ authorization: 'Bearer garbage.garbage.garbage', origin: allowed.origin });
    expect({ status: response.status, challenge: response.headers['www-authenticate'] }).toEqual({ status: 401, challenge: expect.stringContaining('error="invalid_token"') });
  });

  it("preflights and other OPTIONS count against the caller's read budget, and each is logged", async () => {
    const { logger, lines } = capturingLogger('gateway');
    const gateway = await startGateway({
      upstreams: stack.urls,
      logger,
      guard: { corsOrigins: [allowed.origin], rateLimits: { readsPerMinute: 3, leasePoints: 1, redisUrl: process.env.TEST_REDIS_URL! } },
    });
    try {
      const answers = [await preflight(allowed.origin, '/api/users', gateway.url), await options({}, '/api/users', gateway.url), await preflight(allowed.origin, '/api/users', gateway.url), await preflight(allowed.origin, '/api/users', gateway.url)];
      expect(answers.map(({ status }) => status)).toEqual([204, 204, 204, 429]);
      expect(answers[0]!.headers).toMatchObject({ 'access-control-allow-origin': allowed.origin, ratelimit: expect.stringMatching(/^"read";r=2;/), 'x-request-id': expect.any(String) });
      expect(answers[3]!.headers['retry-after']).toBeDefined();
      // The last line is written when the gateway's side of the response closes: a few turns of the loop at most.
      const logged = () => lines.filter((line) => line.msg === 'request' && line.method === 'OPTIONS');
      for (let turn = 0; turn < 100 && logged().length < 4; turn++) await new Promise((resolve) => setImmediate(resolve));
      expect(logged().map((line) => line.status)).toEqual([204, 204, 204, 429]);
    } finally {
      await gateway.close();
    }
  });
});
