/**
 * A replica that dies under requests: the gateway sends again, once, on a fresh connection to
 * another replica, what never reached a service or may safely run twice (a read, a write with an
 * Idempotency-Key), within a budget; a write without a key that the dead replica may have applied
 * gets its 502. Two real service processes behind one name, as a headless Service gives them.
 */
import { RETRY_BUDGET_FLOOR, RETRY_BUDGET_RATIO } from '../../gateway/src/proxy/retry-budget.js';
import { eventually } from '../support/eventually.js';
import { HoldingProxy } from '../support/holding-proxy.js';
import { client, expectProblem, metricsOf, type Client, type TestResponse } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { startWorkspace } from '../../tools/process.js';
import { startGateway, throwawayDatabases } from '../support/stack.js';
import { closedPort } from '../../tools/tcp-proxy.js';

type Replica = Awaited<ReturnType<typeof startWorkspace>>;

/** Two service processes to start: more than the default 30 s on a busy machine. */
const WITH_PROCESSES_MS = 60_000;

const databaseUrl = throwawayDatabases();
const started: Replica[] = [];
afterEach(async () => {
  // Nothing a test starts outlives it: SIGKILL any replica still there, and wait for its exit.
  for (const replica of started.splice(0)) {
    if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGKILL');
    await replica.exited;
  }
});

/** Two replicas of products-service on one schema (the second migrates nothing new). */
async function twoReplicas(label: string): Promise<[Replica, Replica]> {
  const url = databaseUrl(label);
  for (let i = 0; i < 2; i++) started.push(await startWorkspace('products-service', { DATABASE_URL: url }));
  return [started[0]!, started[1]!];
}

/** An in-process gateway whose products service name stands for `ports` on 127.0.0.1 (asked again for each connection). */
async function gatewayTo(ports: () => number[]) {
  return startGateway({
    upstreams: { users: `http://127.0.0.1:${await closedPort()}`, products: 'http://products-service:3002' },
    resolveReplicas: async () => ports().map((port) => ({ host: '127.0.0.1', port })),
  });
}

const deadline = () => ({ signal: AbortSignal.timeout(8_000) });
const product = (sku: string) => ({ sku, name: 'Retried', price: { amount: '1', currency: 'EUR' } });
const run = Date.now().toString(36);

/** `count` GETs of `path`, `concurrency` at a time: their statuses. */
async function reads(api: Client, path: string, count: number, concurrency: number): Promise<number[]> {
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (statuses.length < count) {
        const slot = statuses.push(0) - 1;
        statuses[slot] = (await api.get(path, deadline())).status;
      }
    }),
  );
  return statuses;
}

describe('a replica killed under requests', () => {
  it('fails no read: the reads it had in flight go again, on a fresh connection to the other replica', async () => {
    const [doomed, survivor] = await twoReplicas('retry_reads');
    const gateway = await gatewayTo(() => [doomed.port, survivor.port]);
    try {
      const api = client(gateway.url);
      const path = (await api.post('/api/products', product(`READ-${run}`), deadline())).headers.get('location')!;
      expect(new Set(await reads(api, path, 100, 8))).toEqual(new Set([200]));
      // Stopped, it takes requests and answers none: reads are surely in flight to it when it is killed.
      doomed.child.kill('SIGSTOP');
      let settled = 0;
      const inFlight = Array.from({ length: 16 }, () =>
        api.get(path, deadline()).then((response) => {
          settled++;
          return response.status;
        }),
      );
      await eventually(async () => settled >= 4, { withinMs: 5_000 });
      expect(settled).toBeLessThan(16);
      doomed.child.kill('SIGKILL');
      expect(await Promise.all(inFlight)).toEqual(Array(16).fill(200));
      expect(new Set(await reads(api, path, 100, 8))).toEqual(new Set([200]));
      const metrics = readMetrics(await metricsOf(gateway));
      expect(metrics.value('gateway_upstream_retries_total', { upstream: 'products', reason: 'reset' })).toBeGreaterThanOrEqual(16 - settled);
    } finally {
      await gateway.close();
    }
  }, WITH_PROCESSES_MS);

  it('retries its in-flight writes with an Idempotency-Key once, applied once; one without a key gets a 502 and is applied once', async () => {
    const [doomed, survivor] = await twoReplicas('retry_writes');
    // The doomed replica's connections, as the gateway sees them: each write it answers is held,
    // applied and committed but its answer not sent, until it dies and they are cut.
    const doomedSockets = await new HoldingProxy(doomed.url).start();
    const holds = Array.from({ length: 8 }, () => doomedSockets.hold((method) => method === 'POST'));
    let replicas = [doomedSockets.port];
    const gateway = await gatewayTo(() => replicas);
    try {
      const api = client(gateway.url);
      const skus = Array.from({ length: 8 }, (_, n) => `WRITE-${run}-${n}`);
      const keyed = (n: number) => n % 2 === 0;
      const writes = skus.map((sku, n) => api.post('/api/products', product(sku), { ...deadline(), headers: keyed(n) ? { 'Idempotency-Key': `retry-${sku}` } : {} }));
      await Promise.all(holds.map(({ reached }) => reached));
      // The other replica comes up; the doomed one dies with every write applied and none answered.
      replicas = [doomedSockets.port, survivor.port];
      doomed.child.kill('SIGKILL');
      await doomed.exited;
      await doomedSockets.stop();
      const answers: TestResponse[] = await Promise.all(writes);
      answers.forEach((answer, n) => {
        if (keyed(n)) {
          expect(answer.status).toBe(201);
          // The survivor's replay of what the dead replica stored: the write ran once.
          expect(answer.headers.get('idempotent-replayed')).toBe('true');
        } else {
          expectProblem(answer, 502, 'bad-gateway');
        }
      });
      for (const sku of skus) expect((await api.get(`/api/products?sku=${sku}`, deadline())).body.items).toHaveLength(1);
      const metrics = readMetrics(await metricsOf(gateway));
      expect(metrics.value('gateway_upstream_retries_total', { upstream: 'products' })).toBe(4);
    } finally {
      holds.forEach(({ release }) => release());
      await gateway.close();
      await doomedSockets.stop();
    }
  }, WITH_PROCESSES_MS);
});

describe('a service with no replica up', () => {
  it('answers 502 within a second, every request, and retries no more than its budget', async () => {
    const ports = [await closedPort(), await closedPort()];
    const gateway = await gatewayTo(() => ports);
    const requests = 60;
    try {
      const api = client(gateway.url);
      for (let n = 0; n < requests; n++) {
        const began = performance.now();
        const answer = n % 2 === 0 ? await api.get('/api/products', deadline()) : await api.post('/api/products', product(`DOWN-${run}-${n}`), deadline());
        expectProblem(answer, 502, 'bad-gateway');
        expect(performance.now() - began).toBeLessThan(1_000);
      }
      const metrics = readMetrics(await metricsOf(gateway));
      const retries = metrics.value('gateway_upstream_retries_total', { upstream: 'products' });
      expect(retries).toBeLessThanOrEqual(Math.max(RETRY_BUDGET_FLOOR, RETRY_BUDGET_RATIO * requests));
      expect(retries + metrics.value('gateway_upstream_retries_refused_total', { upstream: 'products', reason: 'connect' })).toBe(requests);
    } finally {
      await gateway.close();
    }
  });
});
