/**
 * What a client sees when a part of the system fails: a dead or hung service behind the gateway,
 * a database that goes away and comes back. Always a fast problem+json, never a hang.
 */
import { CONNECT_TIMEOUT_MS } from '../../gateway/src/proxy/upstream-agent.js';
import { client, expectProblem, metricsOf } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { startGateway, startProductsService, startUsersService, type RunningService } from '../support/stack.js';
import { closedPort, silentServer, TcpProxy } from '../../tools/tcp-proxy.js';

/** Fails the test instead of hanging when an answer does not come within a generous bound. */
const deadline = () => ({ signal: AbortSignal.timeout(8_000) });

let products: RunningService;
beforeAll(async () => {
  products = await startProductsService();
});
afterAll(() => products.close());

async function eventually(check: () => Promise<boolean>, attempts = 100): Promise<void> {
  for (let i = 0; i < attempts; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('condition not reached');
}

describe('a dead upstream', () => {
  it('gives 502 when the service refuses connections, and the other service is unaffected', async () => {
    const gateway = await startGateway({ upstreams: { users: `http://127.0.0.1:${await closedPort()}`, products: products.url } });
    try {
      const api = client(gateway.url);
      const problem = expectProblem(await api.get('/api/users', deadline()), 502, 'bad-gateway');
      expect(problem.detail).toBe('The users service could not be reached');
      expectProblem(await api.post('/api/users', { email: 'a@example.com', name: 'A' }), 502);
      expect((await api.get('/api/products')).status).toBe(200);
    } finally {
      await gateway.close();
    }
  });

  it('gives 504 after UPSTREAM_TIMEOUT_MS when the service does not answer, and the other service answers meanwhile', async () => {
    const hung = await silentServer();
    const gateway = await startGateway({ upstreams: { users: hung.url, products: products.url }, upstreamTimeoutMs: 500 });
    try {
      const api = client(gateway.url);
      const order: string[] = [];
      const slow = api.get('/api/users', deadline()).then((response) => {
        order.push('users');
        return response;
      });
      const fast = await api.get('/api/products');
      order.push('products');
      expect(fast.status).toBe(200);
      expectProblem(await slow, 504, 'gateway-timeout');
      expect(order).toEqual(['products', 'users']);
    } finally {
      await gateway.close();
      await hung.close();
    }
  });
});

describe('a dead replica', () => {
  it('gets no request it cannot take: any request whose connection it refuses goes to a live replica, and it leaves the rotation at once', async () => {
    const dead = await closedPort();
    const live = Number(new URL(products.url).port);
    // The live replica closes each connection after its answer (the gateway's own connections are
    // kept-alive, whatever its clients ask), so every request opens a new one and picks a replica.
    const closing = await new TcpProxy({ host: '127.0.0.1', port: live }).start();
    closing.tamper = (sent) => Buffer.from(sent.toString('latin1').replace(/\r\nconnection: keep-alive\r\n/i, '\r\nConnection: close\r\n'), 'latin1');
    let connections = 0;
    // The products service name stands for two replicas: one killed, one running.
    const gateway = await startGateway({
      upstreams: { users: `http://127.0.0.1:${await closedPort()}`, products: 'http://products-service:3002' },
      resolveReplicas: async () => {
        connections++;
        return [
          { host: '127.0.0.1', port: dead },
          { host: '127.0.0.1', port: closing.port },
        ];
      },
    });
    const product = (n: number) => ({ sku: `REPLICA-${live}-${n}`, name: 'R', price: { amount: '1', currency: 'EUR' } });
    try {
      const api = client(gateway.url);
      // The first connection goes to the dead replica: refused, so nothing was sent, and even a
      // write without an Idempotency-Key goes again, on a fresh connection to the live one.
      const created = await api.post('/api/products', product(0), deadline());
      expect(created.status).toBe(201);
      expect(connections).toBe(2);
      // Ejected at once: each later connection goes to the live replica, none to the dead one first.
      for (let i = 0; i < 6; i++) expect((await api.get(created.headers.get('location')!, deadline())).status).toBe(200);
      for (let n = 1; n <= 4; n++) expect((await api.post('/api/products', product(n), deadline())).status).toBe(201);
      expect(connections).toBe(12);
      const metrics = readMetrics(await metricsOf(gateway));
      expect(metrics.value('gateway_upstream_retries_total', { upstream: 'products', reason: 'connect' })).toBe(1);
    } finally {
      await gateway.close();
      await closing.cut();
    }
  });
});

describe('a busy gateway', () => {
  it('does not call a connection late that the service accepted while the gateway\'s event loop was busy for longer than the connect timeout', async () => {
    const live = Number(new URL(products.url).port);
    let busy = true;
    const gateway = await startGateway({
      upstreams: { users: `http://127.0.0.1:${await closedPort()}`, products: 'http://products-service:3002' },
      resolveReplicas: async () => {
        // The gateway runs in this process: right after it starts connecting (the kernel completes
        // the connection at once), keep its event loop busy past the connect timeout.
        if (busy) {
          busy = false;
          setImmediate(() => {
            const until = Date.now() + CONNECT_TIMEOUT_MS + 500;
            while (Date.now() < until);
          });
        }
        return [{ host: '127.0.0.1', port: live }];
      },
    });
    try {
      const response = await client(gateway.url).get('/api/products', deadline());
      expect(response.status).toBe(200);
      expect(busy).toBe(false);
    } finally {
      await gateway.close();
    }
  });
});

describe('a dead database', () => {
  let proxy: TcpProxy;
  let users: RunningService;

  beforeAll(async () => {
    const mysqlUrl = new URL(process.env.TEST_MYSQL_URL!);
    proxy = await new TcpProxy({ host: mysqlUrl.hostname, port: Number(mysqlUrl.port || 3306) }).start();
    users = await startUsersService({ poolUrl: (url) => proxy.rewrite(url), limits: { connectTimeoutMs: 500, acquireTimeoutMs: 500, queryTimeoutMs: 1_000 } });
  });
  afterAll(async () => {
    await proxy.restore();
    await users.close();
    await proxy.cut();
  });

  it('gives a fast 503 with Retry-After (through the gateway too), /readyz 503, and recovers by itself', async () => {
    const direct = client(users.url);
    const gateway = await startGateway({ upstreams: { users: users.url, products: products.url } });
    const viaGateway = client(gateway.url);
    try {
      // Through the gateway: a user is seen there only by the caller that created it.
      const created = await viaGateway.post('/api/users', { email: 'db@example.com', name: 'Before the outage' });
      expect(created.status).toBe(201);

      await proxy.cut();
      for (const response of [
        await direct.get('/api/users', deadline()),
        await direct.get(created.headers.get('location')!, deadline()),
        await direct.post('/api/users', { email: 'during@example.com', name: 'During' }, deadline()),
        await viaGateway.get('/api/users', deadline()),
      ]) {
        expectProblem(response, 503, 'service-unavailable');
        expect(response.headers.get('retry-after')).toBe('5');
      }
      expectProblem(await direct.get('/readyz', deadline()), 503);
      expect((await direct.get('/healthz')).status).toBe(200);

      await proxy.restore();
      await eventually(async () => (await direct.get('/readyz')).status === 200);
      expect((await viaGateway.get(created.headers.get('location')!)).body).toEqual(created.body);
    } finally {
      await gateway.close();
    }
  });
});

describe('shutdown', () => {
  it('turns /readyz to 503 as soon as shutdown begins', async () => {
    const users = await startUsersService();
    try {
      users.lifecycle.beginShutdown();
      const problem = expectProblem(await client(users.url).get('/readyz'), 503, 'service-unavailable');
      expect(problem.detail).toBe('The process is shutting down');
    } finally {
      await users.close();
    }
  });
});
