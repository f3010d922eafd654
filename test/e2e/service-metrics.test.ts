/**
 * A service's metrics, as the operator's scraper reads them: the real products-service process (its
 * built dist/main.js, as deployed) on a fresh schema, asked over HTTP, scraped on its metrics port.
 * Every series says which service it is, requests are labelled by route template (never by path),
 * and a scrape stays small and quick whatever ids clients ask for. The write-deadline rollback,
 * which needs a slow statement, is seen on a Database in this process.
 */
import { randomUUID } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { ServiceMetrics } from '@app/shared/platform/metrics';
import { Database } from '@app/shared/platform/mysql';
import { deployedNodeOptions, startWorkspace } from '../../tools/process.js';
import { throwawayDatabases } from '../support/stack.js';

const databaseUrl = throwawayDatabases()('metrics');
let products: Awaited<ReturnType<typeof startWorkspace>>;
const POOL_SIZE = 7;

beforeAll(async () => {
  products = await startWorkspace('products-service', { DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: String(POOL_SIZE) }, deployedNodeOptions('products-service'));
});
afterAll(async () => {
  products?.child.kill('SIGTERM');
  await products?.exited;
});

/** One sample of a scrape: its metric name, labels and value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition. */
function samplesOf(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [, name, labelText = '', value] = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)!;
      const labels = Object.fromEntries([...labelText.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, key, text]) => [key!, text!]));
      return { name: name!, labels, value: Number(value) };
    });
}

async function scrape(): Promise<{ samples: Sample[]; ms: number }> {
  const started = performance.now();
  const response = await fetch(`${products.metricsUrl!}/metrics`);
  const text = await response.text();
  const ms = performance.now() - started;
  expect(response.status).toBe(200);
  return { samples: samplesOf(text), ms };
}

/** The value of the sample `name` with (at least) `labels`; undefined when the scrape has none. */
const valueOf = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.find((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))?.value;

const product = () => ({ sku: `MET-${randomUUID()}`, name: 'Metered', price: { amount: '2.5', currency: 'EUR' }, stock: 3 });
const post = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${products.url}/api/products`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });

test('after a read, a write, a 404 and an idempotent replay, the scrape counts each by route template, and the pool and statements by kind', async () => {
  const created = await post(product());
  expect(created.status).toBe(201);
  const { id } = (await created.json()) as { id: string };
  expect((await fetch(`${products.url}/api/products/${id}`)).status).toBe(200);
  expect((await fetch(`${products.url}/api/products`)).status).toBe(200);
  expect((await fetch(`${products.url}/api/products/${uuidv7()}`)).status).toBe(404);
  expect((await fetch(`${products.url}/no/such/route`)).status).toBe(404);
  const key = { 'Idempotency-Key': randomUUID() };
  const body = product();
  expect((await post(body, key)).status).toBe(201);
  const replayed = await post(body, key);
  expect([replayed.status, replayed.headers.get('idempotent-replayed')]).toEqual([201, 'true']);

  const { samples } = await scrape();
  expect(samples.filter(({ labels }) => labels.service !== 'products')).toEqual([]);
  const requests = (labels: Record<string, string>) => valueOf(samples, 'service_http_requests_total', labels);
  expect({
    created: requests({ route: '/api/products', method: 'POST', status: '201' }),
    readItem: requests({ route: '/api/products/{id}', method: 'GET', status: '200' }),
    readList: requests({ route: '/api/products', method: 'GET', status: '200' }),
    unknownItem: requests({ route: '/api/products/{id}', method: 'GET', status: '404' }),
    noRoute: requests({ route: 'unmatched', method: 'GET', status: '404' }),
    readItemTimed: valueOf(samples, 'service_http_request_duration_seconds_count', { route: '/api/products/{id}', method: 'GET', status: '200' }),
    readItemUnder10s: valueOf(samples, 'service_http_request_duration_seconds_bucket', { route: '/api/products/{id}', method: 'GET', status: '200', le: '10' }),
  }).toEqual({ created: 3, readItem: 1, readList: 1, unknownItem: 1, noRoute: 1, readItemTimed: 1, readItemUnder10s: 1 });
  // Only templates: no label holds an id.
  expect(samples.filter(({ labels }) => Object.values(labels).some((value) => value.includes(id)))).toEqual([]);

  expect({
    replays: valueOf(samples, 'service_idempotency_replays_total'),
    rollbacks: valueOf(samples, 'service_write_deadline_rollbacks_total'),
    poolLimit: valueOf(samples, 'service_mysql_pool_limit'),
    waiting: valueOf(samples, 'service_mysql_pool_waiting'),
    inUse: valueOf(samples, 'service_mysql_pool_connections', { state: 'in_use' }),
  }).toEqual({ replays: 1, rollbacks: 0, poolLimit: POOL_SIZE, waiting: 0, inUse: 0 });
  expect(valueOf(samples, 'service_mysql_pool_connections', { state: 'idle' })).toBeGreaterThanOrEqual(1);
  expect(valueOf(samples, 'service_migrations_applied_total')).toBeGreaterThan(0);
  for (const kind of ['select', 'insert']) {
    expect(valueOf(samples, 'service_mysql_queries_total', { kind })).toBeGreaterThan(0);
    expect(valueOf(samples, 'service_mysql_query_duration_seconds_count', { kind })).toBe(valueOf(samples, 'service_mysql_queries_total', { kind }));
  }
  // START TRANSACTION, COMMIT and the like: counted, as other.
  expect(valueOf(samples, 'service_mysql_queries_total', { kind: 'other' })).toBeGreaterThan(0);
  expect(valueOf(samples, 'process_cpu_seconds_total')).toBeGreaterThan(0);
  expect(samples.some(({ name }) => name.startsWith('nodejs_'))).toBe(true);
});

/** GETs of `paths`, ten at a time. */
async function getAll(paths: string[]): Promise<void> {
  for (let i = 0; i < paths.length; i += 10) {
    await Promise.all(paths.slice(i, i + 10).map(async (path) => (await fetch(`${products.url}${path}`)).arrayBuffer()));
  }
}

test('1,000 distinct ids asked for add no series, and a scrape after them answers in under 50 ms', async () => {
  const distinctPaths = (n: number) => Array.from({ length: n }, () => [`/api/products/${uuidv7()}`, `/api/products/${uuidv7()}/${randomUUID()}`]).flat();
  await getAll(distinctPaths(5));
  const serviceSeries = (samples: Sample[]) => samples.filter(({ name }) => name.startsWith('service_')).length;
  const before = serviceSeries((await scrape()).samples);
  await getAll(distinctPaths(1_000));
  const after = await scrape();
  expect(serviceSeries(after.samples)).toBe(before);
  expect(valueOf(after.samples, 'service_http_requests_total', { route: '/api/products/{id}', status: '404' })).toBeGreaterThanOrEqual(1_005);
  // The median of three, so that one scrape slowed by a busy machine does not decide.
  const times = [after.ms, (await scrape()).ms, (await scrape()).ms].sort((a, b) => a - b);
  expect(times[1]).toBeLessThan(50);
});

test('a write rolled back at its write deadline is counted', async () => {
  const metrics = new ServiceMetrics('products');
  const db = new Database(databaseUrl, { writeDeadlineMs: 50 }, metrics.database);
  try {
    // A statement that outlasts the deadline is cut off with its connection: the transaction rolls back.
    const write = new Promise((resolve, reject) => db.boundWrites(() => void db.transaction(() => db.query('SELECT SLEEP(2)')).then(resolve, reject)));
    await expect(write).rejects.toMatchObject({ status: 503 });
  } finally {
    await db.close();
  }
  expect(valueOf(samplesOf(await metrics.registry.metrics()), 'service_write_deadline_rollbacks_total', { service: 'products' })).toBe(1);
});
