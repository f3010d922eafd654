/**
 * The gateway's memory under a flood of cache keys (`npm run chaos`): a real gateway process with
 * CACHE_MEMORY_MB=16 and a Redis of the test's own (bounded, noeviction, as deployed), four
 * subjects each within its read budget. Junk query strings make no entries, so they cannot grow it;
 * distinct valid list pages (every `limit` with every item's `cursor`) fill the in-memory tier,
 * which counts what it holds, keys included: the gateway's RSS grows by at most 64 MB.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { configSchema } from '../../gateway/dist/config.js';
import { testPublicKeyPem, testToken, TEST_RULES } from '../support/auth.js';
import { client, request } from '../support/http.js';
import { deployedNodeOptions, startWorkspace } from '../../tools/process.js';
import { startOwnRedis, type OwnRedis } from '../support/redis-server.js';
import { startProductsService, type RunningService } from '../support/stack.js';
import { countFromEnv } from '../../tools/env.js';

const FLOOD_MS = countFromEnv('MEMORY_FLOOD_MS', 30_000);
const JUNK_FLOOD_MS = countFromEnv('JUNK_FLOOD_MS', 10_000);
const WARM_UP_MS = 5_000;
const SUBJECTS = 4;
/** Each subject's pace: within the gateway's default read budget. */
const PER_SUBJECT_PER_SECOND = Math.floor((configSchema.parse({}).RATE_LIMIT_READS_PER_MINUTE / 60) * 0.95);
const WORKERS_PER_SUBJECT = 8;
const PRODUCTS = 200;
const MB = 1024 * 1024;

let products: RunningService;
let redis: OwnRedis;
let gateway: Awaited<ReturnType<typeof startWorkspace>>;
let tokens: string[];
const ids: string[] = [];
const cursors: string[] = [];

const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${gateway.child.pid}/status`, 'utf8'))![1]) * 1024;

beforeAll(async () => {
  products = await startProductsService();
  // Room for every page the flood stores: a full Redis would refuse to count budgets (503s).
  redis = await startOwnRedis({ maxmemory: '1gb', policy: 'noeviction' });
  const env = {
    AUTH_PUBLIC_KEY: testPublicKeyPem,
    AUTH_ISSUER: TEST_RULES.issuer,
    AUTH_AUDIENCE: TEST_RULES.audience,
    // Every service the list names leads to products-service: only products are read here.
    UPSTREAM_URL_TEMPLATE: products.url,
    REDIS_URL: redis.url,
    CACHE_MEMORY_MB: '16',
    LISTEN_SOCKETS: '1',
  };
  gateway = await startWorkspace('gateway', env, deployedNodeOptions('gateway'));
  tokens = await Promise.all(Array.from({ length: SUBJECTS }, (_, i) => testToken({ subject: `flooder-${i}`, scopes: ['products:read'] })));
  const api = client(gateway.url);
  for (let i = 0; i < PRODUCTS; i++) {
    const created = await api.post('/api/products', { sku: `FLOOD-${i}-${randomBytes(3).toString('hex')}`, name: `Flood ${i}`, description: 'x'.repeat(200), price: { amount: '1.00', currency: 'EUR' } });
    expect(created.status).toBe(201);
    ids.push(created.body.id);
  }
  // Every item's cursor: a page of one, walked to the end.
  for (let cursor: string | null = ''; cursor !== null; ) {
    const page = await api.get(`/api/products?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
    cursor = page.body.nextCursor;
    if (cursor !== null) cursors.push(cursor);
  }
  // The gateway grows to its working size under any load: warmed up with hits first, on items and
  // on list pages of every size (none that the flood reads). Bodies of 1–60 KB leave glibc's heap
  // fragmented, and it keeps freed memory (Node's `process.memoryUsage()` docs): that much comes with
  // such traffic, whatever its keys.
  await flood(WARM_UP_MS, (n) => `/api/products/${ids[n % ids.length]}`);
  await flood(WARM_UP_MS, (n) => `/api/products?limit=${1 + (n % 200)}`);
}, 120_000);

afterAll(async () => {
  gateway?.child.kill('SIGTERM');
  await gateway?.exited;
  await redis?.stop();
  await products?.close();
});

/**
 * Each subject sends `target(n)` for n = 0, 1, … from several workers, paced within its budget,
 * for `ms`; the gateway's peak RSS is sampled meanwhile. Resolves with the statuses and the peak.
 */
async function flood(ms: number, target: (n: number) => string) {
  const statuses = new Map<number, number>();
  let next = 0;
  let peak = rss();
  const sampler = setInterval(() => (peak = Math.max(peak, rss())), 250);
  const started = Date.now();
  const worker = async (token: string, sent: { count: number }) => {
    while (Date.now() - started < ms) {
      const due = started + (sent.count / PER_SUBJECT_PER_SECOND) * 1000;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      sent.count++;
      const response = await request(gateway.url, 'GET', target(next++), { token });
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    }
  };
  await Promise.all(tokens.flatMap((token) => {
    const sent = { count: 0 };
    return Array.from({ length: WORKERS_PER_SUBJECT }, () => worker(token, sent));
  }));
  clearInterval(sampler);
  return { statuses: Object.fromEntries(statuses), peak: Math.max(peak, rss()) };
}

it(`junk query strings on item reads (${JUNK_FLOOD_MS / 1000} s) are refused and make no entry: the gateway does not grow`, async () => {
  const before = rss();
  const junk = (n: number) => `/api/products/${ids[n % ids.length]}?j=${n.toString(36)}${'q'.repeat(8_000)}`;
  const { statuses, peak } = await flood(JUNK_FLOOD_MS, junk);
  console.log(`junk-query flood: ${JSON.stringify(statuses)}; gateway RSS ${Math.round(before / MB)} MB before, peak ${Math.round(peak / MB)} MB`);
  expect(Object.keys(statuses)).toEqual(['400']);
  expect(peak - before).toBeLessThanOrEqual(32 * MB);
}, JUNK_FLOOD_MS + 60_000);

it(`distinct valid list pages from ${SUBJECTS} subjects (${FLOOD_MS / 1000} s) grow the gateway by at most 64 MB with CACHE_MEMORY_MB=16`, async () => {
  const before = rss();
  const page = (n: number) => `/api/products?limit=${1 + (n % 200)}&cursor=${cursors[Math.floor(n / 200) % cursors.length]}`;
  const { statuses, peak } = await flood(FLOOD_MS, page);
  console.log(`list-page flood: ${JSON.stringify(statuses)}; gateway RSS ${Math.round(before / MB)} MB before, peak ${Math.round(peak / MB)} MB`);
  expect(Object.keys(statuses)).toEqual(['200']);
  expect(peak - before).toBeLessThanOrEqual(64 * MB);
}, FLOOD_MS + 60_000);
