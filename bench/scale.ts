/**
 * `npm run bench -- --scale`: does a read get slower as the tables grow? Every read endpoint (item,
 * first page, deep page, `?sku=`, `?email=`) against products-service and users-service on tables of
 * 10k rows and of 1M rows (filled by scripts/seed.ts, in throwaway schemas dropped afterwards).
 * Each request picks one of 1,000 targets spread over the whole table at random (ids, skus, emails,
 * cursors), so neither size is served from a handful of hot rows. Prints each endpoint's p99 at both
 * sizes and their ratio, and MySQL's EXPLAIN of the exact statement each endpoint runs (recorded
 * from the services' own data layer) at 1M rows. Writes bench/results/scale.json.
 */
import { writeFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import type { RowDataPacket } from 'mysql2';
import type { Database, SqlValue } from '@app/shared/platform/mysql';
import { MySqlStore, type TableMapping } from '@app/shared/resource/store';
import { encodeCursor } from '@app/shared/resource/rules';
import { productsTable } from '../products-service/dist/data/products-table.js';
import { usersTable } from '../users-service/dist/data/users-table.js';
import { seed } from '../scripts/seed.ts';
import { serviceModules, type ServiceModule } from '../tools/services.ts';
import {
  cleanUpOnSignals,
  dropSchemas,
  ensureBenchTools,
  freePort,
  machine,
  pinning,
  schemaUrl,
  startNode,
  stopAll,
  throwawaySchema,
  type Server,
} from './support.ts';
import { combinedRuns, wrk, type LoadResult } from './wrk.ts';
import { countFromEnv, countsFromEnv } from '../tools/env.ts';

const SIZES = countsFromEnv('BENCH_SCALE_ROWS', [10_000, 1_000_000]);
const SECONDS = countFromEnv('BENCH_SECONDS', 4);
const RUNS = countFromEnv('BENCH_SCALE_RUNS', 5);
const CONNECTIONS = countFromEnv('BENCH_SCALE_CONNECTIONS', 16);
const SAMPLES = 1_000;
const LUA = new URL('random-path.lua', import.meta.url).pathname;

const uuidOf = (bin: Buffer) => {
  const hex = bin.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
};

/** The services measured, by their names in services.json: the ones whose data layers ENDPOINTS ask. */
type Subject = 'products' | 'users';
const SUBJECTS: Subject[] = ['products', 'users'];

interface Endpoint {
  key: string;
  label: string;
  service: Subject;
  /** The request paths, one picked at random per request. */
  paths: (sample: Sample) => string[];
  /** What the endpoint asks the data layer (to record its SQL). */
  ask: (stores: { products: MySqlStore<unknown, unknown>; users: MySqlStore<unknown, unknown> }, sample: Sample) => Promise<unknown>;
}

interface Sample {
  productIds: string[];
  skus: string[];
  emails: string[];
}

const PAGE = 50 + 1; // the default page size, plus the row that says whether there is a next page

const ENDPOINTS: Endpoint[] = [
  { key: 'item', label: 'GET /api/products/{id}', service: 'products', paths: (s) => s.productIds.map((id) => `/api/products/${id}`), ask: (st, s) => st.products.find(s.productIds[0]!) },
  { key: 'firstPage', label: 'GET /api/products', service: 'products', paths: () => ['/api/products'], ask: (st) => st.products.list({ afterId: undefined, limit: PAGE, filter: {} }) },
  {
    key: 'deepPage',
    label: 'GET /api/products?cursor=…',
    service: 'products',
    paths: (s) => s.productIds.map((id) => `/api/products?cursor=${encodeCursor(id)}`),
    ask: (st, s) => st.products.list({ afterId: s.productIds[0], limit: PAGE, filter: {} }),
  },
  { key: 'sku', label: 'GET /api/products?sku=…', service: 'products', paths: (s) => s.skus.map((sku) => `/api/products?sku=${sku}`), ask: (st, s) => st.products.list({ afterId: undefined, limit: PAGE, filter: { sku: s.skus[0] } }) },
  {
    key: 'email',
    label: 'GET /api/users?email=…',
    service: 'users',
    paths: (s) => s.emails.map((email) => `/api/users?email=${encodeURIComponent(email.toUpperCase())}`),
    ask: (st, s) => st.users.list({ afterId: undefined, limit: PAGE, filter: { email: s.emails[0] } }),
  },
];

async function sampleOf({ products, users }: Record<Subject, string>): Promise<Sample> {
  const connection = await mysql.createConnection(schemaUrl(products));
  try {
    const [rows] = await connection.query<RowDataPacket[]>(`SELECT id, sku FROM products ORDER BY RAND() LIMIT ${SAMPLES}`);
    const [userRows] = await connection.query<RowDataPacket[]>(`SELECT email FROM \`${users}\`.users ORDER BY RAND() LIMIT ${SAMPLES}`);
    return { productIds: rows.map((r) => uuidOf(r.id as Buffer)), skus: rows.map((r) => r.sku as string), emails: userRows.map((r) => r.email as string) };
  } finally {
    await connection.end();
  }
}

/** The statements the data layer runs for each endpoint, recorded from a stand-in for the Database. */
async function statementsOf(sample: Sample): Promise<Record<string, { sql: string; values: SqlValue[] }>> {
  let last: { sql: string; values: SqlValue[] } | undefined;
  const recorder = { query: async (sql: string, values: SqlValue[] = []) => ((last = { sql, values }), []) } as unknown as Database;
  const stores = {
    products: new MySqlStore(recorder, productsTable as TableMapping<unknown, unknown>),
    users: new MySqlStore(recorder, usersTable as TableMapping<unknown, unknown>),
  };
  const statements: Record<string, { sql: string; values: SqlValue[] }> = {};
  for (const endpoint of ENDPOINTS) {
    await endpoint.ask(stores, sample);
    statements[endpoint.key] = last!;
  }
  return statements;
}

async function explain(schemas: Record<Subject, string>, statements: Awaited<ReturnType<typeof statementsOf>>) {
  const plans: Record<string, { sql: string; plan: RowDataPacket[] }> = {};
  for (const endpoint of ENDPOINTS) {
    const connection = await mysql.createConnection(schemaUrl(schemas[endpoint.service]));
    try {
      const { sql, values } = statements[endpoint.key]!;
      const [plan] = await connection.query<RowDataPacket[]>(`EXPLAIN ${sql}`, values);
      plans[endpoint.key] = { sql, plan };
    } finally {
      await connection.end();
    }
  }
  return plans;
}

/** Reads every path once (CONNECTIONS at a time), and checks that each answers 200. */
async function readEveryTarget(url: string, paths: string[]): Promise<void> {
  const pending = [...paths];
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
        const response = await fetch(`${url}${next}`);
        await response.arrayBuffer();
        if (response.status !== 200) throw new Error(`${url}${next} answered ${response.status}`);
      }
    }),
  );
}

/** The subjects' entries and definitions, from services.json; throws when one is not listed. */
async function subjectModules(): Promise<Record<Subject, ServiceModule>> {
  const modules = await serviceModules();
  return Object.fromEntries(
    SUBJECTS.map((name) => {
      const found = modules.find(({ entry }) => entry.name === name);
      if (!found) throw new Error(`services.json lists no ${name} service, which --scale measures`);
      return [name, found];
    }),
  ) as Record<Subject, ServiceModule>;
}

/** One table size: its schemas, a sample of what is in them, its running services, and each endpoint's file of paths. */
interface Sized {
  rows: number;
  schemas: Record<Subject, string>;
  sample: Sample;
  servers: Record<Subject, Server>;
  files: Record<string, string>;
}

/** Starts the subjects on `schemas`, writes each endpoint's paths to a file in `directory`, and runs each once (a warm-up). */
async function startSized(rows: number, schemas: Record<Subject, string>, modules: Record<Subject, ServiceModule>, directory: string): Promise<Sized> {
  const sample = await sampleOf(schemas);
  const servers = {} as Record<Subject, Server>;
  for (const name of SUBJECTS) {
    const { workspace } = modules[name].entry;
    servers[name] = await startNode(workspace, `${workspace}/dist/main.js`, { DATABASE_URL: schemaUrl(schemas[name]) }, await freePort());
  }
  const files: Record<string, string> = {};
  for (const endpoint of ENDPOINTS) {
    files[endpoint.key] = path.join(directory, `${rows}-${endpoint.key}.txt`);
    await writeFile(files[endpoint.key]!, `${endpoint.paths(sample).join('\n')}\n`);
    await wrk(servers[endpoint.service].url, { seconds: 1, connections: CONNECTIONS, script: LUA, scriptArgs: [files[endpoint.key]!] });
  }
  return { rows, schemas, sample, servers, files };
}

type Measured = LoadResult & { runs: LoadResult[] };

/** RUNS runs of `endpoint` at every size, alternating between sizes; the medians per size. */
async function measure(endpoint: Endpoint, sized: Sized[]): Promise<Map<number, Measured>> {
  // The database's buffer pool (128 MiB by default, shared) is smaller than a table of 1M rows
  // and its indexes, and the endpoints measured before this one have filled it with their own
  // pages: without this, the first run at 1M rows reads this endpoint's pages from disk, which
  // 10k rows (a few MB) never do, and that says how big the pool is, not how the query scales.
  for (const { servers, sample } of sized) await readEveryTarget(servers[endpoint.service].url, endpoint.paths(sample));
  const runs = new Map<number, LoadResult[]>(sized.map(({ rows }) => [rows, []]));
  for (let run = 0; run < RUNS; run++) {
    for (const { rows, servers, files } of sized) {
      runs.get(rows)!.push(await wrk(servers[endpoint.service].url, { seconds: SECONDS, connections: CONNECTIONS, script: LUA, scriptArgs: [files[endpoint.key]!] }));
    }
  }
  const measured = new Map<number, Measured>();
  for (const [rows, results] of runs) {
    const result = {
      ...combinedRuns(results),
      runs: results,
    };
    measured.set(rows, result);
    console.log(`  ${endpoint.label.padEnd(30)} ${String(rows).padStart(8)} rows ${String(result.requestsPerSecond).padStart(6)} req/s  p50 ${result.p50Ms} ms  p99 ${result.p99Ms} ms  non-2xx ${result.non2xx}`);
  }
  return measured;
}

/** Prints each endpoint's p99 at the smallest and largest size with their ratio, and the plans; writes bench/results/scale.json. */
async function report(p99s: Record<string, Record<number, Measured>>, plans: Awaited<ReturnType<typeof explain>>): Promise<void> {
  const [small, large] = [Math.min(...SIZES), Math.max(...SIZES)];
  const ratios = Object.fromEntries(ENDPOINTS.map((e) => [e.label, Math.round((p99s[e.key]![large]!.p99Ms / p99s[e.key]![small]!.p99Ms) * 100) / 100]));
  console.log();
  console.table(
    Object.fromEntries(
      ENDPOINTS.map((e) => {
        const [a, b] = [p99s[e.key]![small]!, p99s[e.key]![large]!];
        return [e.label, { [`p99 ms, ${small}`]: a.p99Ms, [`p99 ms, ${large}`]: b.p99Ms, ratio: ratios[e.label], [`req/s, ${small}`]: a.requestsPerSecond, [`req/s, ${large}`]: b.requestsPerSecond, 'non-2xx': a.non2xx + b.non2xx }];
      }),
    ),
  );
  console.log(`EXPLAIN at ${large} rows:`);
  for (const endpoint of ENDPOINTS) {
    const { sql, plan } = plans[endpoint.key]!;
    console.log(`\n${endpoint.label}\n  ${sql}`);
    for (const row of plan) console.log(`  type=${row.type} key=${row.key} key_len=${row.key_len} ref=${row.ref} rows=${row.rows} Extra=${row.Extra}`);
  }
  const out = new URL('results/', import.meta.url);
  await mkdir(out, { recursive: true });
  const results = {
    date: new Date().toISOString(),
    command: 'npm run bench -- --scale',
    machine: machine(),
    settings: { sizes: SIZES, connections: CONNECTIONS, runs: RUNS, seconds: SECONDS, samples: SAMPLES, pinned: Boolean(pinning) },
    endpoints: Object.fromEntries(ENDPOINTS.map((e) => [e.label, p99s[e.key]])),
    ratios,
    explain: Object.fromEntries(ENDPOINTS.map((e) => [e.label, plans[e.key]])),
  };
  await writeFile(new URL('scale.json', out), `${JSON.stringify(results, null, 2)}\n`);
  console.log('\nwritten to bench/results/scale.json');
}

export async function runScale(publish: boolean): Promise<void> {
  ensureBenchTools();
  const modules = await subjectModules();
  const sizes = SIZES.map((rows) => ({ rows, schemas: Object.fromEntries(SUBJECTS.map((name) => [name, throwawaySchema(`${rows}_${name}`)])) as Record<Subject, string> }));
  const all = sizes.flatMap(({ schemas }) => Object.values(schemas));
  cleanUpOnSignals(all);
  const directory = await mkdtemp(path.join(os.tmpdir(), 'bench-scale-'));
  try {
    for (const { rows, schemas } of sizes) {
      for (const name of SUBJECTS) {
        const ms = await seed({ databaseUrl: schemaUrl(schemas[name]), service: modules[name].service, rows });
        console.log(`seeded ${rows} ${name} in ${(ms / 1000).toFixed(1)} s`);
      }
    }
    // Both sizes' services run side by side and every endpoint's runs alternate between the sizes,
    // so a burst of other work on the machine falls on both alike.
    const sized: Sized[] = [];
    for (const { rows, schemas } of sizes) sized.push(await startSized(rows, schemas, modules, directory));
    console.log(
      `wrk -t1 -c${CONNECTIONS}, median of ${RUNS} × ${SECONDS} s per size, runs alternating between sizes; each request one of ${SAMPLES} targets at random, every target read once at both sizes just before an endpoint's runs`,
    );
    const p99s: Record<string, Record<number, Measured>> = {};
    for (const endpoint of ENDPOINTS) p99s[endpoint.key] = Object.fromEntries(await measure(endpoint, sized));
    await stopAll();
    const largest = sized.find(({ rows }) => rows === Math.max(...SIZES))!;
    await report(p99s, await explain(largest.schemas, await statementsOf(largest.sample)));
    if (publish) console.log('(--publish has no chart to copy for --scale)');
  } finally {
    await stopAll();
    await rm(directory, { recursive: true, force: true });
    await dropSchemas(all);
  }
}
