/**
 * The API description and the docs page as the gateway serves them: the document equals the
 * committed openapi.json, survives an upstream that goes away, and the page works offline.
 */
import { readFileSync } from 'node:fs';
import { serviceDocument } from '@app/shared/service';
import { serviceModules } from '../../tools/services.js';
import { OPENAPI_FILE } from '../support/contract.js';
import { client, expectProblem, type Client } from '../support/http.js';
import { startGateway, startStack } from '../support/stack.js';
import { closedPort, TcpProxy } from '../../tools/tcp-proxy.js';

const committed: unknown = JSON.parse(readFileSync(OPENAPI_FILE, 'utf8'));
let stack: Awaited<ReturnType<typeof startStack>>;
let api: Client;

beforeAll(async () => {
  stack = await startStack();
  api = client(stack.gateway.url);
});
afterAll(() => stack.close());

describe('GET /openapi.json', () => {
  it('is the committed openapi.json, merged from what the services serve', async () => {
    const response = await api.get('/openapi.json');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(response.body).toEqual(committed);
  });

  it('is served by each service for its own part (not proxied: the gateway answers its own)', async () => {
    for (const { entry, service } of await serviceModules('src')) {
      expect((await client(stack.services[entry.name]!.url).get('/openapi.json')).body).toEqual(JSON.parse(JSON.stringify(serviceDocument(service))));
    }
  });

  it('answers HEAD, OPTIONS, and 405 for other methods', async () => {
    expect((await api.head('/openapi.json')).status).toBe(200);
    expect((await api.send('OPTIONS', '/openapi.json')).headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    expectProblem(await api.post('/openapi.json', {}), 405, 'method-not-allowed');
  });

  it('is a 503 with Retry-After while a service has never answered for its part', async () => {
    const gateway = await startGateway({ upstreams: { ...stack.urls, users: `http://127.0.0.1:${await closedPort()}` } });
    try {
      const problem = expectProblem(await client(gateway.url).get('/openapi.json'), 503, 'service-unavailable');
      expect(problem.detail).toBe('The API description of the users service is unavailable; try again shortly');
    } finally {
      await gateway.close();
    }
  });

  it('keeps the last description a service gave while it is down', async () => {
    const proxy = await new TcpProxy({ host: '127.0.0.1', port: stack.users.running.port }).start();
    const gateway = await startGateway({ upstreams: { ...stack.urls, users: proxy.rewrite(stack.users.url) } });
    try {
      const viaGateway = client(gateway.url);
      expect((await viaGateway.get('/openapi.json')).body).toEqual(committed);
      await proxy.cut();
      expectProblem(await viaGateway.get('/api/users'), 502, 'bad-gateway');
      const whileDown = await viaGateway.get('/openapi.json');
      expect(whileDown.status).toBe(200);
      expect(whileDown.body).toEqual(committed);
    } finally {
      await proxy.cut();
      await gateway.close();
    }
  });
});

describe('GET /docs', () => {
  it('is a Swagger UI page that loads everything from the gateway, nothing from elsewhere', async () => {
    const page = await api.get('/docs');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toMatch(/^default-src 'self';/);
    expect(page.text).not.toMatch(/http/i);
    expect(page.text).not.toMatch(/\/\/|<base/); // no protocol-relative URL, no base that moves them

    const loaded = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map(([, url]) => url!);
    expect(loaded).toEqual(
      expect.arrayContaining(['/docs/swagger-ui.css', '/docs/swagger-ui-bundle.js', '/docs/swagger-initializer.js', '/docs/favicon-32x32.png']),
    );
    for (const url of loaded) {
      expect(url).toMatch(/^\/docs\//);
      const asset = await api.get(url);
      expect({ url, status: asset.status }).toEqual({ url, status: 200 });
    }

    const initializer = await api.get('/docs/swagger-initializer.js');
    expect(initializer.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(initializer.text).not.toMatch(/http/i);
    expect(initializer.text).toContain("url: '/openapi.json'");
    expect(initializer.text).toContain('validatorUrl: null'); // else Swagger UI sends the document to validator.swagger.io
    const stylesheet = await api.get('/docs/swagger-ui.css');
    expect(stylesheet.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect(stylesheet.text.match(/url\((?!["']?data:)[^)]*\)/g)).toBeNull(); // images are inline data: URLs
  });

  it('revalidates its files (304) and answers 404 for any file it does not serve', async () => {
    const first = await api.get('/docs/swagger-ui.css');
    // fetch adds Cache-Control: no-cache to a conditional request unless it has one; browsers send max-age=0.
    const again = await api.get('/docs/swagger-ui.css', { headers: { 'if-modified-since': first.headers.get('last-modified')!, 'cache-control': 'max-age=0' } });
    expect(again.status).toBe(304);
    for (const file of ['index.html', 'swagger-ui-bundle.js.map', '..%2Fpackage.json', 'nope.js']) {
      expectProblem(await api.get(`/docs/${file}`), 404, 'not-found');
    }
  });
});
