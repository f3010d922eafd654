/**
 * The alert rules and the dashboard against a real Prometheus scraping the real processes (the
 * gateway, users-service and products-service, as deployed): every metric a rule or panel names is
 * in their live scrapes, every panel's query answers with data, and the faults' alerts go pending
 * (products-service stopped, Redis cut off) and resolve once they are over.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readMetrics } from '../../tools/metrics.js';
import { deployedNodeOptions, startWorkspace } from '../../tools/process.js';
import { TcpProxy } from '../../tools/tcp-proxy.js';
import { RULES_FILE } from '../../scripts/monitoring.ts';
import { DASHBOARD_FILE, dashboardPicture, type Dashboard } from '../../scripts/dashboard-picture.ts';
import { TEST_RULES, testPublicKeyPem, testToken } from '../support/auth.js';
import { eventually } from '../support/eventually.js';
import { client, type TestResponse } from '../support/http.js';
import { type ActiveAlert, type RunningPrometheus, startPrometheus } from '../support/prometheus.js';
import { throwawayDatabases } from '../support/stack.js';
import { metricNames, rulesOf } from '../monitoring/promql.js';

/** Starting three processes and Prometheus, and waiting for its first ratios, takes a while on a busy machine. */
const SETUP_MS = 90_000;

/** Clients sending the successes after the outage at once: each is held to its caller's rate limits (6,000 reads, 3,000 writes a minute). */
const CALLERS = 16;

const databaseUrl = throwawayDatabases();
const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;

type Started = Awaited<ReturnType<typeof startWorkspace>>;
const started: Started[] = [];
let prometheus: RunningPrometheus;
let redis: TcpProxy;
let gateway: Started;
let products: Started;
const productsDatabase = databaseUrl('products');
const traffic = new AbortController();
let driving: Promise<void>;

async function start(workspace: string, env: Record<string, string>): Promise<Started> {
  const process = await startWorkspace(workspace, env, deployedNodeOptions(workspace));
  started.push(process);
  return process;
}

async function stop(process: Started): Promise<void> {
  process.child.kill('SIGTERM');
  await process.exited;
}

/** Reads and writes of both services through the gateway, a few at a time, until the test ends. */
async function drive(gatewayUrl: string, signal: AbortSignal): Promise<void> {
  const api = client(gatewayUrl);
  let n = 0;
  const loop = async () => {
    while (!signal.aborted) {
      n += 1;
      const product = await api.post('/api/products', { sku: `MON-${n}`, name: 'Watched', price: { amount: '2.50', currency: 'EUR' } });
      const user = await api.post('/api/users', { email: `watched-${n}@example.com`, name: 'Watched' });
      for (const created of [product, user]) if (created.status === 201) await api.get(created.headers.get('location')!);
      await api.get('/api/products?limit=5');
    }
  };
  await Promise.all([loop(), loop()]);
}

const alertsNamed = async (name: string) => (await prometheus.alerts()).filter((alert: ActiveAlert) => alert.labels.alertname === name);

/** The failed share of requests above which ErrorBudgetBurnFast holds for availability: its comparison's right-hand side in the rules file, as Prometheus evaluates it. */
async function fastBurnThreshold(): Promise<number> {
  const { expr } = rulesOf().find((rule) => rule.alert === 'ErrorBudgetBurnFast')!;
  const threshold = /> on \(slo\) group_left \(\) (.+)$/m.exec(expr)![1]!;
  const answer = await prometheus.query(threshold);
  return Number(answer.data!.result.find((sample) => sample.metric.slo === 'availability')!.value[1]);
}

/** The gateway's /api requests answered with a 5xx so far, by class (reads: GET and HEAD), as the SLO rules count them. */
async function apiErrors(): Promise<{ read: number; write: number }> {
  const metrics = readMetrics(await (await fetch(`${gateway.metricsUrl}/metrics`)).text());
  const errors = { read: 0, write: 0 };
  for (const { labels, value } of metrics.samples('gateway_http_requests_total')) {
    if (/^\/api\/./.test(labels.route ?? '') && /^5/.test(labels.status ?? '')) errors[/^(GET|HEAD)$/.test(labels.method ?? '') ? 'read' : 'write'] += value;
  }
  return errors;
}

/**
 * Sends until `count` requests have succeeded (2xx), from CALLERS clients at once, each its own
 * caller with its own rate limits, as a busy API's traffic comes; fails once as many have not.
 */
async function succeed(count: number, send: (api: ReturnType<typeof client>, n: number) => Promise<TestResponse>): Promise<void> {
  let sent = 0;
  let succeeded = 0;
  let failed = 0;
  const caller = async (subject: string) => {
    const api = client(gateway.url, { token: await testToken({ subject }) });
    while (succeeded < count) {
      if (failed >= count) throw new Error(`${failed} of ${sent} requests failed before ${count} succeeded`);
      sent += 1;
      if ((await send(api, sent)).status < 300) succeeded += 1;
      else failed += 1;
    }
  };
  await Promise.all(Array.from({ length: CALLERS }, () => caller(`diluting-${randomUUID()}`)));
}

beforeAll(async () => {
  redis = await new TcpProxy({ host: new URL(process.env.TEST_REDIS_URL!).hostname, port: Number(new URL(process.env.TEST_REDIS_URL!).port) }).start();
  const users = await start('users-service', { DATABASE_URL: databaseUrl('users') });
  products = await start('products-service', { DATABASE_URL: productsDatabase });
  gateway = await start('gateway', {
    GATEWAY_UPSTREAMS: `users=${users.url},products=${products.url}`,
    AUTH_PUBLIC_KEY: testPublicKeyPem,
    AUTH_ISSUER: TEST_RULES.issuer,
    AUTH_AUDIENCE: TEST_RULES.audience,
    CACHE_ENABLED: 'true',
    REDIS_URL: redis.rewrite(process.env.TEST_REDIS_URL!),
  });
  prometheus = await startPrometheus({ gateway: [gateway.metricsUrl!], 'users-service': [users.metricsUrl!], 'products-service': [products.metricsUrl!] }, [RULES_FILE]);
  driving = drive(gateway.url, traffic.signal);
  // Until every target is up and the SLO ratios are recorded from a few scrapes of traffic.
  await eventually(async () => {
    const up = await prometheus.query('sum(up)');
    const ratios = await prometheus.query('class_slo:gateway_api_errors:ratio_rate5m');
    return Number(up.data?.result[0]?.value[1]) === 3 && (ratios.data?.result.length ?? 0) >= 4;
  }, { withinMs: 60_000, everyMs: 500 });
}, SETUP_MS);

afterAll(async () => {
  traffic.abort();
  await driving?.catch(() => undefined);
  await prometheus?.close();
  await Promise.all(started.filter((process) => process.child.exitCode === null && process.child.signalCode === null).map(stop));
  await redis?.cut();
}, SETUP_MS);

/** Every metric name the processes export: their families (a histogram's three series names), read from their /metrics now. */
async function exportedNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const process of started.filter((p) => p.child.exitCode === null)) {
    const text = await (await fetch(`${process.metricsUrl}/metrics`)).text();
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      names.add(name!);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    }
    expect(readMetrics(text).has('process_cpu_seconds_total')).toBe(true);
  }
  return names;
}

test('every metric a rule or a panel names is in a live scrape of the processes, or is Prometheus\'s own `up`', async () => {
  const rules = rulesOf();
  const recorded = new Set(rules.flatMap((rule) => rule.record ?? []));
  const exprs = [...rules.map((rule) => rule.expr), ...dashboard.panels.flatMap((panel) => panel.targets.map((target) => target.expr))];
  const used = new Set(exprs.flatMap(metricNames).filter((name) => !recorded.has(name)));
  const exported = await exportedNames();
  // `up` is the one series Prometheus adds to every target it scrapes.
  if ((await prometheus.query('up')).data?.result.length) exported.add('up');
  expect([...used].filter((name) => !exported.has(name))).toEqual([]);
});

test('every panel of the dashboard answers from the live Prometheus, with data', async () => {
  for (const panel of dashboard.panels) {
    const answers = await Promise.all(panel.targets.map((target) => prometheus.query(target.expr)));
    expect({ panel: panel.title, errors: answers.flatMap((answer) => answer.error ?? []) }).toEqual({ panel: panel.title, errors: [] });
    expect({ panel: panel.title, series: answers.some((answer) => (answer.data?.result.length ?? 0) > 0) }).toEqual({ panel: panel.title, series: true });
  }
});

test('with products-service stopped its replica-down, service-down and availability burn alerts go pending, and resolve once it is back and enough requests succeed', async () => {
  // Before the fault, none of its alerts (a busy machine may slow requests past the latency SLO's
  // threshold, which this test is not about).
  expect((await prometheus.alerts()).filter((alert) => ['ReplicaDown', 'ServiceDown', 'ErrorBudgetBurnFast'].includes(alert.labels.alertname!) && alert.labels.slo !== 'latency')).toEqual([]);
  const { port } = new URL(products.url);
  const metricsPort = new URL(products.metricsUrl!).port;
  await stop(products);
  await eventually(async () => (await alertsNamed('ReplicaDown')).some((alert) => alert.labels.job === 'products-service'), { withinMs: 20_000, everyMs: 250 });
  await eventually(async () => (await alertsNamed('ServiceDown')).some((alert) => alert.labels.job === 'products-service'), { withinMs: 20_000, everyMs: 250 });
  await eventually(async () => (await alertsNamed('ErrorBudgetBurnFast')).some((alert) => alert.labels.slo === 'availability'), { withinMs: 30_000, everyMs: 250 });
  products = await start('products-service', { DATABASE_URL: productsDatabase, PORT: port, METRICS_PORT: metricsPort });
  await eventually(async () => (await alertsNamed('ReplicaDown')).length + (await alertsNamed('ServiceDown')).length === 0, { withinMs: 20_000, everyMs: 250 });
  // The burn rate is a share of requests: as many successes as put the outage's errors under the
  // threshold on their own (counting none already sent) end the alert, as traffic does in production.
  const threshold = await fastBurnThreshold();
  const errors = await apiErrors();
  const needed = { read: Math.ceil(errors.read / threshold), write: Math.ceil(errors.write / threshold) };
  await Promise.all([
    succeed(needed.read, (api) => api.get('/api/products?limit=5')),
    succeed(needed.write, (api, n) => api.post('/api/users', { email: `diluting-${n}@example.com`, name: 'Diluting' })),
  ]);
  const burning = async () => (await alertsNamed('ErrorBudgetBurnFast')).filter((alert) => alert.labels.slo === 'availability');
  await eventually(async () => (await burning()).length === 0, { withinMs: 30_000, everyMs: 250 }).catch(async (error: unknown) => {
    const ratios = await prometheus.query('class_slo:gateway_api_errors:ratio_rate5m{slo="availability"}');
    throw new Error(
      `ErrorBudgetBurnFast still ${JSON.stringify(await burning())} after ${needed.read} reads and ${needed.write} writes succeeded against ` +
        `${errors.read} and ${errors.write} failed (threshold ${threshold}; 5m ratios ${JSON.stringify(ratios.data?.result)})`,
      { cause: error },
    );
  });
}, 240_000);

test('with Redis cut off the gateway\'s Redis-down alert goes pending, and resolves once Redis is back', async () => {
  expect(await alertsNamed('GatewayRedisDown')).toEqual([]);
  await redis.cut();
  await eventually(async () => (await alertsNamed('GatewayRedisDown')).length === 1, { withinMs: 30_000, everyMs: 250 });
  await redis.restore();
  await eventually(async () => (await alertsNamed('GatewayRedisDown')).length === 0, { withinMs: 30_000, everyMs: 250 });
}, 60_000);

test('the dashboard drawn from this Prometheus is a PNG (into DASHBOARD_PICTURE, when set: docs/dashboard.png is one)', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'dashboard-'));
  try {
    const file = process.env.DASHBOARD_PICTURE ?? path.join(dir, 'dashboard.png');
    await dashboardPicture(prometheus.url, file);
    const png = await readFile(file);
    expect(png.subarray(1, 4).toString()).toBe('PNG');
    expect(png.length).toBeGreaterThan(50_000);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
