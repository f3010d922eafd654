/**
 * Rolling restarts under load (`npm run chaos`), measured from outside as a client sees them: two
 * real replicas of every service in services.json behind one name each (ReplicaStack), a real
 * gateway with the cache off, and a mixed load of 32 requests in flight (90% reads, 10% creates,
 * MixedLoad). Each replica in turn gets SIGTERM, exits, is started again and waited on until ready,
 * as a Deployment with `maxUnavailable: 0` rolls its pods. No response may be a 5xx, no request may
 * fail at the socket, and no write may be applied twice. The same holds while the new release's
 * migration adds a column (expand), and when a later one drops it (contract: docs/deploy.md).
 */
import { randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import { readServiceList, type ServiceEntry } from '@app/shared/platform/services';
import { checkWrites, MixedLoad, type LoadCounts, type LoadTarget } from '../support/mixed-load.js';
import { releaseOf, type Release } from '../support/releases.js';
import { eventually } from '../support/eventually.js';
import { ReplicaStack, type Replica } from '../support/replica-stack.js';
import { throwawayDatabases } from '../support/stack.js';

const schemaFor = throwawayDatabases();

/** How the load creates a record of each service; a service added to services.json needs one here. */
const CREATES: Record<string, { table: string; createBody: (marker: string) => Record<string, unknown> }> = {
  users: { table: 'users', createBody: (marker) => ({ email: `${marker}@example.com`, name: marker }) },
  products: { table: 'products', createBody: (marker) => ({ sku: marker, name: marker, price: { amount: '1.00', currency: 'EUR' }, stock: 1 }) },
};

/** The new releases of products-service: one adds a column with a default (expand), the next drops it (contract). */
const EXPAND = { '0004_add_colour.sql': "ALTER TABLE products ADD COLUMN colour VARCHAR(32) NOT NULL DEFAULT 'none';\n" };
const CONTRACT = { ...EXPAND, '0005_drop_colour.sql': 'ALTER TABLE products DROP COLUMN colour;\n' };

let stack: ReplicaStack;
let targets: LoadTarget[];
const databases = new Map<string, string>();
const releases: Release[] = [];

beforeAll(async () => {
  const services = readServiceList();
  const missing = services.filter(({ name }) => CREATES[name] === undefined).map(({ name }) => name);
  if (missing.length > 0) throw new Error(`the roll's load does not know how to create a record of ${missing.join(', ')}: add it to CREATES`);
  for (const service of services) databases.set(service.name, schemaFor(service.name));
  stack = await ReplicaStack.start((service: ServiceEntry) => databases.get(service.name)!);
  targets = services.map(({ name }) => ({ name, databaseUrl: databases.get(name)!, listLimit: 5, ...CREATES[name]! }));
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await Promise.all(releases.map((release) => release.remove()));
}, 60_000);

/** The load's counts, one line for the report. */
const summary = (what: string, counts: LoadCounts, seconds: number) =>
  `${what}: ${counts.requests} requests in ${seconds.toFixed(1)} s (${counts.reads} reads, ${counts.writes} creates); statuses ${JSON.stringify(counts.byStatus)}; socket failures ${JSON.stringify(counts.socketFailures)}`;

/** Requests the load sends before a fault and after it: the replicas are in use when it comes, and it is over only once they served again. */
const REQUESTS_AROUND = 2_000;

/** Resolves once the load has sent `count` more requests (within 30 s, or a loud failure). */
const moreRequests = (load: MixedLoad, count: number) => {
  const target = load.counts.requests + count;
  return eventually(async () => load.counts.requests >= target, { withinMs: 30_000 });
};

/** Runs `during` under a fresh mixed load; resolves with the load's counts and the database's verdict on its writes. */
async function underLoad(what: string, during: () => Promise<void>, options: { writes?: boolean } = {}) {
  const load = await MixedLoad.prepare(stack.gatewayUrl, targets, options);
  const started = Date.now();
  load.start();
  try {
    await moreRequests(load, REQUESTS_AROUND);
    await during();
    await moreRequests(load, REQUESTS_AROUND);
  } finally {
    await load.stop();
  }
  const writes = await checkWrites(targets, load.writes);
  console.log(
    [
      summary(what, load.counts, (Date.now() - started) / 1000),
      `  writes: ${writes.writes}, applied but unacknowledged ${writes.appliedUnacknowledged}, applied twice ${writes.writtenTwice.length}, acknowledged and missing ${writes.acknowledgedMissing.length}`,
      `  logged so far: ${JSON.stringify(stack.loggedCounts())}`,
      ...load.counts.failures.map((failure) => `  failed: ${failure}`),
    ].join('\n'),
  );
  return { counts: load.counts, writes };
}

/** The 5xx answers by status, and the socket failures by code (the first few of each are printed). */
const failuresOf = (counts: LoadCounts) => ({
  serverErrors: Object.fromEntries(Object.entries(counts.byStatus).filter(([status]) => Number(status) >= 500)),
  socketFailures: counts.socketFailures,
});

/** No 5xx, no socket failure, no write applied twice or lost. */
function expectInvisible({ counts, writes }: Awaited<ReturnType<typeof underLoad>>) {
  expect(failuresOf(counts)).toEqual({ serverErrors: {}, socketFailures: {} });
  expect(writes.writtenTwice).toEqual([]);
  expect(writes.acknowledgedMissing).toEqual([]);
  // The load did reach every service throughout.
  expect(counts.byStatus[200]).toBeGreaterThan(1_000);
  expect(counts.byStatus[201]).toBeGreaterThan(50);
}

/** Rolls every replica of `name`, one at a time, onto `release` (default: the one it runs). */
async function roll(name: string, release?: string) {
  const set = stack.set(name);
  for (const host of set.replicas.map((replica) => replica.host)) {
    await stack.restart(set, set.replicas.find((replica) => replica.host === host)!, { release });
  }
}

it('a rolling restart of every service, one replica at a time, is invisible to clients', async () => {
  const result = await underLoad('rolling restart of every service', async () => {
    for (const { service } of stack.sets) await roll(service.name);
  });
  expectInvisible(result);
}, 120_000);

/** A connection to products' schema, for a look at what the migrations did. */
const productsSchema = () => mysql.createConnection(databases.get('products')!);

/** Whether products' table has the column `colour`. */
async function hasColour(): Promise<boolean> {
  const connection = await productsSchema();
  try {
    const [rows] = await connection.query<mysql.RowDataPacket[]>("SHOW COLUMNS FROM products LIKE 'colour'");
    return rows.length === 1;
  } finally {
    await connection.end();
  }
}

/** Whether a connection other than `holder` waits for the migration lock of products' schema. */
async function migrationWaitsForLock(holder: mysql.Connection): Promise<boolean> {
  const [rows] = await holder.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS waiting FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND DB = DATABASE() AND INFO LIKE 'SELECT GET_LOCK(%'");
  return Number(rows[0]!.waiting) > 0;
}

/** A create sent to the replica itself (as the gateway would send it), bypassing the gateway: which replica answers is then known. */
const createOn = (url: string, marker: string) =>
  fetch(`${url}/api/products`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-auth-subject': 'roll-check' }, body: JSON.stringify(CREATES.products!.createBody(marker)) });

it('a release whose migration adds a column (expand), then one that drops it (contract), rolls in with 0 failures', async () => {
  const expand = await releaseOf('products-service', EXPAND);
  const contract = await releaseOf('products-service', CONTRACT);
  releases.push(expand, contract);
  const set = stack.set('products');
  const result = await underLoad('products rolled to a release adding a column, then to one dropping it', async () => {
    const [first, old] = set.replicas as [Replica, Replica];
    // The lock held here stands for another replica's migration: the new one must wait for it.
    const lock = `migrate:${new URL(databases.get('products')!).pathname.slice(1)}`;
    const holder = await productsSchema();
    try {
      await holder.query('SELECT GET_LOCK(?, 10)', [lock]);
      await stack.stopReplica(first);
      const { ready } = stack.startReplica(set, first.host, expand.folder);
      await eventually(() => migrationWaitsForLock(holder), { withinMs: 15_000 });
      // Meanwhile the old release serves alone, on the table as it was.
      expect(await hasColour()).toBe(false);
      expect((await createOn(ReplicaStack.urlOf(set, old), `roll-check-${randomUUID()}`)).status).toBe(201);
      await holder.query('SELECT RELEASE_LOCK(?)', [lock]);
      await ready;
    } finally {
      await holder.end();
    }
    expect(await hasColour()).toBe(true);
    // The old release serves the expanded table until it exits: its creates leave the new column its default.
    expect((await createOn(ReplicaStack.urlOf(set, old), `roll-check-${randomUUID()}`)).status).toBe(201);
    await stack.restart(set, old, { release: expand.folder });
    await roll('products', contract.folder);
    expect(await hasColour()).toBe(false);
  });
  expectInvisible(result);
}, 120_000);

// Depends on the gateway retrying a read whose connection was reset on another replica (issue 47):
// a SIGKILLed replica answers nothing more, and the reads in flight to it are cut.
it('reads see 0 failures while a replica is killed outright (SIGKILL) and started again', async () => {
  const set = stack.set('products');
  const result = await underLoad(
    'products replica SIGKILLed under a read load',
    async () => {
      await stack.restart(set, set.replicas[0]!, { signal: 'SIGKILL' });
    },
    { writes: false },
  );
  expect(failuresOf(result.counts)).toEqual({ serverErrors: {}, socketFailures: {} });
  expect(result.counts.byStatus[200]).toBeGreaterThan(1_000);
}, 120_000);
