/**
 * Chaos under load (`npm run chaos`): two real replicas of each service (processes, so SIGKILL is
 * real) behind one gateway with its Redis cache, a bounded load of concurrent clients — creates with
 * an Idempotency-Key retried on 502/503/504 and connection errors, updates with If-Match, reads —
 * while the test kills a replica with SIGKILL and restarts it, cuts the database for 2 s and Redis
 * for 2 s (through TCP proxies it controls: the shared servers are never touched). Afterwards the
 * database must hold exactly what the clients saw acknowledged.
 */
import { randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import { migrateSchema } from '@app/shared/service';
import { service as productsService } from '../../products-service/src/app.js';
import { service as usersService } from '../../users-service/src/app.js';
import { startWorkspace, type RunningProcess } from '../../tools/process.js';
import { dropSchema, startGateway, testLogger, throwawayDatabaseUrl, type RunningGateway } from '../support/stack.js';
import { TcpProxy } from '../../tools/tcp-proxy.js';
import { defaultToken } from '../support/auth.js';

const CLIENTS = 6;
const LOAD_MS = 20_000;
/** How long a client keeps retrying one operation before it gives up (well past the in-flight lease, 6 s). */
const OPERATION_DEADLINE_MS = 20_000;
const REQUEST_TIMEOUT_MS = 8_000;
const RETRYABLE = new Set([502, 503, 504]);
/** The only error statuses the load may see; anything else (a 500 above all) fails the run. */
const DOCUMENTED_ERRORS = new Set([409, 412, 502, 503, 504]);
const IN_FLIGHT = 'https://problems.example/idempotency-in-flight';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const portOf = (url: string) => Number(new URL(url).port || 3306);

interface Answer {
  status: number;
  etag: string | null;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of the API
  body: any;
}

/** What the load saw, and what it was told was done. */
const seen = {
  requests: 0,
  retries: 0,
  connectionErrors: 0,
  gaveUp: 0,
  statuses: new Map<number, number>(),
  unexpected: [] as string[],
  staleReads: [] as string[],
};
const createdProducts = new Map<string, { id: string; key: string }>(); // sku → acknowledged
const createdUsers = new Map<string, { id: string; key: string }>(); // email → acknowledged
const attemptedKeys = new Set<string>();
/** Each product's last acknowledged update (version, stock); `uncertain` once an update was given up. */
const updates = new Map<string, { version: number; stock: number; uncertain: boolean; acknowledged: number }>();

let gatewayUrl: string;

/** One request through the gateway; a connection error or timeout is an exception. */
async function send(method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  seen.requests++;
  const headers: Record<string, string> = { authorization: `Bearer ${defaultToken}`, ...options.headers };
  if (options.body !== undefined) headers['content-type'] ??= 'application/json';
  const response = await fetch(new URL(path, gatewayUrl), {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await response.text();
  const answer: Answer = { status: response.status, etag: response.headers.get('etag'), body: text && /json/.test(response.headers.get('content-type') ?? '') ? JSON.parse(text) : undefined };
  seen.statuses.set(answer.status, (seen.statuses.get(answer.status) ?? 0) + 1);
  if (answer.status >= 400 && !DOCUMENTED_ERRORS.has(answer.status)) seen.unexpected.push(`${method} ${path}: ${answer.status} ${text.slice(0, 200)}`);
  if (answer.status === 409 && answer.body?.type !== IN_FLIGHT) seen.unexpected.push(`${method} ${path}: 409 ${answer.body?.type} (a retried write ran twice?)`);
  return answer;
}

/** Retries on 502/503/504, 409 in flight and connection errors until an answer or the deadline (undefined: gave up). */
async function withRetries(method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer | undefined> {
  const deadline = Date.now() + OPERATION_DEADLINE_MS;
  for (let attempt = 0; ; attempt++) {
    if (attempt > 0) seen.retries++;
    try {
      const answer = await send(method, path, options);
      const retryable = RETRYABLE.has(answer.status) || (answer.status === 409 && answer.body?.type === IN_FLIGHT);
      if (!retryable) return answer;
    } catch {
      seen.connectionErrors++;
    }
    if (Date.now() > deadline) {
      seen.gaveUp++;
      return undefined;
    }
    await sleep(100 + Math.random() * 200);
  }
}

/** The version an answer's ETag names. One without a version is itself a wrong answer: NaN would never compare as stale. */
function versionOf(answer: { status: number; etag: string | null }, what: string): number {
  const version = Number(/^"(\d+)"$/.exec(answer.etag ?? '')?.[1] ?? Number.NaN);
  if (Number.isNaN(version)) seen.unexpected.push(`${what}: ${answer.status} with ETag ${String(answer.etag)}, not a version`);
  return version;
}

async function createProduct(client: number, n: number): Promise<string | undefined> {
  const sku = `CHAOS-${client}-${n}`;
  const key = randomUUID();
  attemptedKeys.add(key);
  const answer = await withRetries('POST', '/api/products', {
    body: { sku, name: `Chaos ${client}/${n}`, price: { amount: '1.00', currency: 'EUR' }, stock: 0 },
    headers: { 'Idempotency-Key': key },
  });
  if (answer?.status !== 201) return undefined;
  createdProducts.set(sku, { id: answer.body.id, key });
  updates.set(answer.body.id, { version: versionOf(answer, `POST /api/products (${sku})`), stock: 0, uncertain: false, acknowledged: 0 });
  return answer.body.id as string;
}

async function createUser(client: number, n: number): Promise<void> {
  const email = `chaos-${client}-${n}@example.com`;
  const key = randomUUID();
  attemptedKeys.add(key);
  const answer = await withRetries('POST', '/api/users', { body: { email, name: `Chaos ${client}/${n}` }, headers: { 'Idempotency-Key': key } });
  if (answer?.status === 201) createdUsers.set(email, { id: answer.body.id, key });
}

/** A read must never show data older than this client's own last acknowledged write. */
async function readBack(id: string): Promise<void> {
  const answer = await withRetries('GET', `/api/products/${id}`);
  const known = updates.get(id);
  if (answer?.status !== 200 || !known) return;
  const version = versionOf(answer, `GET /api/products/${id}`);
  if (version < known.version) seen.staleReads.push(`${id}: read version ${version} after version ${known.version} was acknowledged`);
}

async function update(id: string): Promise<void> {
  const known = updates.get(id);
  if (!known || known.uncertain) return;
  const stock = Math.floor(Math.random() * 1000);
  const answer = await withRetries('PATCH', `/api/products/${id}`, {
    body: { stock },
    headers: { 'content-type': 'application/merge-patch+json', 'If-Match': `"${known.version}"`, 'Idempotency-Key': randomUUID() },
  });
  if (answer === undefined) known.uncertain = true;
  else if (answer.status === 200) {
    known.version = versionOf(answer, `PATCH /api/products/${id}`);
    known.stock = stock;
    known.acknowledged++;
  } else if (answer.status === 412) known.uncertain = true; // changed by a write nobody was told of: the check below says so
}

/** One client: create a product and a user, then update and read its products, until the load ends. */
async function client(index: number, until: number): Promise<void> {
  const mine: string[] = [];
  for (let n = 0; Date.now() < until; n++) {
    const id = await createProduct(index, n);
    if (id) mine.push(id);
    if (n % 3 === 0) await createUser(index, n);
    const target = mine[Math.floor(Math.random() * mine.length)];
    if (target) {
      await update(target);
      await readBack(target);
    }
  }
}

interface Replica {
  workspace: string;
  port: number;
  process: RunningProcess;
}

describe('chaos under load', () => {
  const databases = { users: throwawayDatabaseUrl('chaos_users'), products: throwawayDatabaseUrl('chaos_products') };
  let mysqlProxy: TcpProxy;
  let redisProxy: TcpProxy;
  let gateway: RunningGateway;
  const replicas: Replica[] = [];

  const startReplica = async (workspace: string, databaseUrl: string, port = 0): Promise<Replica> => {
    const started = await startWorkspace(workspace, {
      DATABASE_URL: mysqlProxy.rewrite(databaseUrl),
      MIGRATE_ON_START: 'false',
      PORT: String(port),
      // Every stored response is checked afterwards: none may be dropped for its caller's quota
      // (1 MiB by default, which a fast run's creates and updates pass).
      IDEMPOTENCY_SCOPE_BYTES: String(64 * 1024 * 1024),
    });
    return { workspace, port: started.port, process: started };
  };

  beforeAll(async () => {
    const mysqlUrl = new URL(process.env.TEST_MYSQL_URL!);
    const redisUrl = new URL(process.env.TEST_REDIS_URL!);
    mysqlProxy = await new TcpProxy({ host: mysqlUrl.hostname, port: portOf(mysqlUrl.toString()) }).start();
    redisProxy = await new TcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) }).start();
    await migrateSchema(usersService, databases.users, testLogger);
    await migrateSchema(productsService, databases.products, testLogger);
    replicas.push(
      ...(await Promise.all([
        startReplica('users-service', databases.users),
        startReplica('users-service', databases.users),
        startReplica('products-service', databases.products),
        startReplica('products-service', databases.products),
      ])),
    );
    const endpoints = (workspace: string) => replicas.filter((r) => r.workspace === workspace).map((r) => ({ host: '127.0.0.1', port: r.port }));
    gateway = await startGateway({
      upstreams: { users: 'http://users-service:3001', products: 'http://products-service:3002' },
      upstreamTimeoutMs: 5_000,
      cache: { redisUrl: `redis://127.0.0.1:${redisProxy.port}` },
      resolveReplicas: async (hostname) => endpoints(hostname),
    });
    gatewayUrl = gateway.url;
  }, 60_000);

  afterAll(async () => {
    await gateway?.close();
    for (const replica of replicas) {
      replica.process.child.kill('SIGKILL');
      await replica.process.exited;
    }
    await mysqlProxy?.cut();
    await redisProxy?.cut();
    await Promise.all([dropSchema(databases.users), dropSchema(databases.products)]);
  }, 30_000);

  it('loses and doubles no acknowledged write while a replica is killed, the database and Redis are cut', async () => {
    /** Each fault and when it came: all of them while the load ran. */
    const faults: { fault: string; at: number }[] = [];
    const injected = (fault: string) => faults.push({ fault, at: Date.now() });
    const started = Date.now();
    const until = started + LOAD_MS;
    const load = Promise.all(Array.from({ length: CLIENTS }, (_, index) => client(index, until)));

    const inject = async () => {
      await sleep(3_000);
      const victim = replicas.find((r) => r.workspace === 'products-service')!;
      victim.process.child.kill('SIGKILL');
      await victim.process.exited;
      injected('SIGKILL products-service replica');
      await sleep(3_000);
      victim.process = (await startReplica('products-service', databases.products, victim.port)).process;
      injected('restarted it on its port');
      await sleep(1_500);
      await mysqlProxy.cut();
      injected('database cut for 2 s');
      await sleep(2_000);
      await mysqlProxy.restore();
      await sleep(3_000);
      await redisProxy.cut();
      injected('Redis cut for 2 s');
      await sleep(2_000);
      await redisProxy.restore();
    };
    await Promise.all([load, inject()]);
    const seconds = (Date.now() - started) / 1000;

    // Against the database, directly (not through the proxy).
    const products = await mysql.createConnection(databases.products);
    const users = await mysql.createConnection(databases.users);
    try {
      const [productRows] = await products.query<mysql.RowDataPacket[]>('SELECT LOWER(HEX(id)) AS id, sku, version, stock FROM products');
      const [userRows] = await users.query<mysql.RowDataPacket[]>('SELECT LOWER(HEX(id)) AS id, email FROM users');
      const [keyRows] = await products.query<mysql.RowDataPacket[]>('SELECT idempotency_key, response_status, response_body FROM idempotency_keys UNION ALL SELECT idempotency_key, response_status, response_body FROM `' + new URL(databases.users).pathname.slice(1) + '`.idempotency_keys');
      const hex = (id: string) => id.replaceAll('-', '');

      const problems: string[] = [];
      // Every acknowledged create exists exactly once, with the id the client was given.
      for (const [sku, created] of createdProducts) {
        const rows = productRows.filter((row) => row.sku === sku);
        if (rows.length !== 1 || rows[0]!.id !== hex(created.id)) problems.push(`product ${sku}: ${rows.length} rows, acknowledged ${created.id}`);
      }
      for (const [email, created] of createdUsers) {
        const rows = userRows.filter((row) => row.email === email);
        if (rows.length !== 1 || rows[0]!.id !== hex(created.id)) problems.push(`user ${email}: ${rows.length} rows, acknowledged ${created.id}`);
      }
      // No duplicate from a retried key: every stored key answered one resource, and every resource
      // in the database was created by exactly one key's request.
      const createdByKeys = keyRows.filter((row) => row.response_status === 201).map((row) => hex(JSON.parse(row.response_body as string).id as string));
      if (new Set(createdByKeys).size !== createdByKeys.length) problems.push('one resource stored as the response of two keys');
      for (const row of keyRows) if (!attemptedKeys.has(row.idempotency_key as string) && row.response_status === 201) problems.push(`a key nobody sent: ${row.idempotency_key}`);
      const rowIds = [...productRows, ...userRows].map((row) => row.id as string);
      const unclaimed = rowIds.filter((id) => !createdByKeys.includes(id));
      if (unclaimed.length > 0) problems.push(`${unclaimed.length} resources no key's stored response names (a create that ran twice)`);
      // Every acknowledged update is there (and nothing after it, unless an update was given up).
      let updatesChecked = 0;
      for (const [id, known] of updates) {
        const row = productRows.find((r) => r.id === hex(id));
        if (!row) continue;
        updatesChecked += known.acknowledged;
        const version = Number(row.version);
        if (known.uncertain ? version < known.version : version !== known.version || Number(row.stock) !== known.stock) {
          problems.push(`product ${id}: version ${version} stock ${row.stock}, acknowledged version ${known.version} stock ${known.stock}${known.uncertain ? ' (then one given up)' : ''}`);
        }
      }

      const statuses = Object.fromEntries([...seen.statuses].sort(([a], [b]) => a - b));
      console.log(
        [
          `chaos: ${seconds.toFixed(1)} s, ${CLIENTS} clients`,
          `  requests ${seen.requests}, retries ${seen.retries} (connection errors ${seen.connectionErrors}), operations given up ${seen.gaveUp}`,
          `  statuses ${JSON.stringify(statuses)}`,
          `  faults injected: ${faults.map(({ fault, at }) => `${fault} at ${((at - started) / 1000).toFixed(1)} s`).join('; ')}`,
          `  acknowledged writes checked: ${createdProducts.size} product creates, ${createdUsers.size} user creates, ${updatesChecked} updates; ${rowIds.length} rows, ${keyRows.length} idempotency keys`,
          `  stale reads ${seen.staleReads.length}, unexpected responses ${seen.unexpected.length}, problems ${problems.length}`,
        ].join('\n'),
      );

      expect(faults.filter(({ at }) => at < until).map(({ fault }) => fault)).toEqual(['SIGKILL products-service replica', 'restarted it on its port', 'database cut for 2 s', 'Redis cut for 2 s']);
      expect(seen.unexpected).toEqual([]);
      expect(seen.statuses.get(500)).toBeUndefined();
      expect(seen.staleReads).toEqual([]);
      expect(problems).toEqual([]);
      // The load did work through the faults, and they were felt.
      expect(createdProducts.size).toBeGreaterThan(CLIENTS * 5);
      expect(seen.retries).toBeGreaterThan(0);
    } finally {
      await products.end();
      await users.end();
    }
  }, 110_000);
});
