/**
 * What `npm run bench` needs around the measurements: Debian tools installed when missing, server
 * processes pinned to one core and the load generator to another (wrk itself: bench/wrk.ts), each
 * server's CPU time and memory read from /proc, and each Node server's garbage-collection time read
 * from bench/gc-meter.mjs.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import mysql from 'mysql2/promise';
import { devPublicKey, signDevToken } from '../tools/dev-token.ts';
import { NEEDS } from '../scripts/setup/needs.ts';
import { provide } from '../scripts/setup/provision.ts';
import { deployedNodeOptions as startOptions } from '../tools/process.ts';
import { closedPort as freePort } from '../tools/tcp-proxy.ts';
import { countFromEnv } from '../tools/env.ts';

export { startOptions };

export const ROOT = new URL('..', import.meta.url).pathname;
export const MYSQL_URL = process.env.BENCH_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

function onPath(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The bench's programs (wrk, nginx: scripts/setup/needs.ts), installed where they can be, else a stop naming them. */
export function ensureBenchTools(): void {
  provide(NEEDS.filter((need) => need.for.includes('bench')), 'the bench', (line) => console.log(line));
}

/**
 * Servers on core 0, the load generator on core 1, when the machine has two cores or more and
 * `taskset`: then a server never competes with the client that measures it, and every ratio
 * compares the same single core.
 */
export const pinning = os.cpus().length >= 2 && onPath('taskset') ? { server: '0', load: '1' } : undefined;

/** `command args` run on `core` (when pinning is possible). */
export function pinned(core: string | undefined, command: string, args: string[]): [string, string[]] {
  return core === undefined ? [command, args] : ['taskset', ['-c', core, command, ...args]];
}

/** A free port on 127.0.0.1 for a server the bench starts: the tests' own helper. */
export { freePort };

export interface Server {
  name: string;
  url: string;
  child: ChildProcess;
  /** The processes whose CPU and memory count for this server (nginx: master and worker). */
  pids(): number[];
  /** Its collections so far and their time, for a Node server started with the GC meter (`gcMeter`). */
  gcTime?: () => Promise<GcTime>;
}

/** What bench/gc-meter.mjs answers: the collections of its process so far, and their time in ms. */
export interface GcTime {
  count: number;
  ms: number;
}

/** Node options that preload the GC meter (bench/gc-meter.mjs); given after a process's own options. */
export const GC_METER = ['--import', './bench/gc-meter.mjs'];

/**
 * Asks a preload of `child` (over its IPC channel) `question` and resolves with the `key` field of
 * its answer; fails after `timeoutMs` without one rather than report a run without it.
 */
function askPreload(child: ChildProcess, question: string | object, key: string, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const answer = (message: unknown) => {
      if (typeof message !== 'object' || message === null || !(key in message)) return;
      done();
      resolve((message as Record<string, unknown>)[key]);
    };
    const done = () => {
      clearTimeout(timer);
      child.off('message', answer);
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`process ${child.pid} did not answer ${JSON.stringify(question)} in ${timeoutMs} ms`));
    }, timeoutMs);
    child.on('message', answer);
    child.send(question, (error) => {
      if (!error) return;
      done();
      reject(error);
    });
  });
}

/** Asks the GC meter preloaded into `child` for its collections so far. */
export const readGcMeter = (child: ChildProcess, timeoutMs = 5_000): Promise<GcTime> => askPreload(child, 'gc-time?', 'gcTime', timeoutMs) as Promise<GcTime>;

/** Node options that preload the allocation sampler (bench/allocation-sampler.mjs), which answers over IPC. */
export const ALLOCATION_SAMPLER = ['--import', './bench/allocation-sampler.mjs'];
/** Bytes between the allocation sampler's samples, on average: fine enough for a request's few kilobytes over a run of thousands. */
export const ALLOCATION_SAMPLING_BYTES = 512;

/**
 * Runs `load` with the allocation sampler preloaded into `child` on: what `load` gave, and the
 * sampling heap profile of every allocation the process made meanwhile.
 */
export async function sampleAllocations<Result, Profile>(child: ChildProcess, load: () => Promise<Result>): Promise<{ result: Result; profile: Profile }> {
  const failed = (answer: unknown) => typeof answer === 'object' && answer !== null && 'error' in answer;
  const started = await askPreload(child, { startAllocations: ALLOCATION_SAMPLING_BYTES }, 'allocations', 5_000);
  if (started !== 'started') throw new Error(`the allocation sampler of process ${child.pid} did not start: ${JSON.stringify(started)}`);
  const result = await load();
  const profile = await askPreload(child, 'allocations-stop', 'allocations', 30_000);
  if (failed(profile)) throw new Error(`the allocation sampler of process ${child.pid} failed: ${JSON.stringify(profile)}`);
  return { result, profile: profile as Profile };
}

const running = new Set<ChildProcess>();

/** Stops `child`: SIGTERM, then SIGKILL after 5 s. */
function stop(child: ChildProcess): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Stops one server, for a bench that stops its servers in an order of its own. */
export async function stopServer(server: Server): Promise<void> {
  await stop(server.child);
  running.delete(server.child);
}

/** Stops every process this bench started (SIGTERM, then SIGKILL after 5 s). */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map(stop));
  running.clear();
}

/**
 * Starts `command args` and waits until `readyPath` answers 2xx (for 20 s at most). Pinned to
 * `core`, the servers' by default; `ipc` opens a channel to the process (the load curve's
 * event-loop probe answers on it); `gcMeter`, when `args` preload the GC meter (GC_METER), opens
 * one too, and the server reads the meter (`gcTime`). `env` goes over the defaults: quiet logs,
 * metrics on any port.
 */
export async function startServer(
  name: string,
  command: string,
  args: string[],
  options: { env?: Record<string, string>; port: number; readyPath?: string; childPids?: (pid: number) => number[]; core?: string; ipc?: boolean; gcMeter?: boolean },
): Promise<Server> {
  const [file, argv] = pinned('core' in options ? options.core : pinning?.server, command, args);
  const child = spawn(file, argv, {
    cwd: ROOT,
    // The load generator's connections all come from one address: no cap per address on the gateway.
    env: { PATH: process.env.PATH, PORT: String(options.port), METRICS_PORT: '0', MAX_CONNECTIONS_PER_ADDRESS: '0', LOG_LEVEL: 'warn', ...options.env },
    stdio: ['ignore', 'inherit', 'inherit', ...(options.ipc || options.gcMeter ? (['ipc'] as const) : [])],
  });
  running.add(child);
  const url = `http://127.0.0.1:${options.port}`;
  for (let attempt = 0; attempt < 200; attempt++) {
    if (child.exitCode !== null) break;
    if (await fetch(`${url}${options.readyPath ?? '/healthz'}`).then((r) => r.ok, () => false)) {
      // taskset execs the command: the child's pid is the server's.
      const pids = () => [child.pid!, ...(options.childPids?.(child.pid!) ?? [])];
      return { name, url, child, pids, ...(options.gcMeter ? { gcTime: () => readGcMeter(child) } : {}) };
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${name} (${command} ${args.join(' ')}) did not start`);
}

/** The node options of `file` when it is a workspace's entry point (`<workspace>/dist/main.js`), else none. */
export function nodeOptionsFor(file: string): string[] {
  const workspace = /^([\w-]+)\/dist\/main\.js$/.exec(file)?.[1];
  return workspace === undefined ? [] : startOptions(workspace);
}

/**
 * A node process of this repository (`node file`), with the Node that runs the bench; a workspace's
 * entry point with the node options of its start script; the GC meter preloaded after them.
 */
export const startNode = (name: string, file: string, env: Record<string, string>, port: number) =>
  startServer(name, process.execPath, [...nodeOptionsFor(file), ...GC_METER, file], { env, port, gcMeter: true });

/**
 * Processes of each gateway configuration a bench compares, each measured every round
 * (BENCH_GATEWAY_PROCESSES): two identical gateway processes differ by several percent, so with one
 * process per configuration chance would decide a ratio.
 */
export const GATEWAY_PROCESSES = countFromEnv('BENCH_GATEWAY_PROCESSES', 3);

/** GATEWAY_PROCESSES processes of one configuration, each started by `start` with its name (`name #1`, …). */
export const startProcesses = (name: string, start: (name: string) => Promise<Server>): Promise<Server[]> =>
  Promise.all(Array.from({ length: GATEWAY_PROCESSES }, (_, i) => start(`${name} #${i + 1}`)));

/** products-service as deployed, on `schema`, with one product in it: the service and that product's path, which the benchmarks read. */
export async function productsServiceWithAProduct(schema: string, product: { sku: string; name: string }): Promise<{ products: Server; path: string }> {
  const products = await startNode('products-service', 'products-service/dist/main.js', { DATABASE_URL: schemaUrl(schema) }, await freePort());
  const created = await fetch(`${products.url}/api/products`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...product, description: 'Measured.', price: { amount: '19.99', currency: 'EUR' }, stock: 42 }),
  });
  if (created.status !== 201) throw new Error(`could not create the product: ${created.status} ${await created.text()}`);
  return { products, path: created.headers.get('location')! };
}

/** User + system CPU time of `pids`, in microseconds (from /proc; 0 where it is missing). */
export function cpuMicros(pids: number[]): number {
  const tick = 1e6 / 100; // USER_HZ is 100 on Linux
  let total = 0;
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
      total += (Number(fields[11]) + Number(fields[12])) * tick; // utime, stime
    } catch {
      // gone
    }
  }
  return total;
}

/** Busy and total time of `core` (or of the whole machine) so far, in ticks (/proc/stat). */
function coreTicks(core: string | undefined): { busy: number; total: number } {
  const label = core === undefined ? 'cpu ' : `cpu${core} `;
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(label));
  const fields = (line ?? '').trim().split(/\s+/).slice(1).map(Number);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0); // idle, iowait
  const total = fields.reduce((sum, n) => sum + n, 0);
  return { busy: total - idle, total };
}

/**
 * Waits until the servers' core has been nearly idle (under 5% busy) for half a second, at most
 * `maxMs`: a run then starts on a quiet core, not in the tail of the run before it (the server just
 * measured collecting its garbage once its allocation stops, a few seconds later), so that the
 * second target of a pair does not pay for the first's tail. At most 5 s: a tail is over by then, and a core busy with someone else's work (another bench on a
 * shared machine) stays busy however long the bench waits. Returns how long it waited.
 */
export async function settle(maxMs = 5_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    const before = coreTicks(pinning?.server);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const after = coreTicks(pinning?.server);
    const busyShare = (after.busy - before.busy) / Math.max(1, after.total - before.total);
    if (busyShare < 0.05 || Date.now() - started >= maxMs) return Date.now() - started;
  }
}

/** Fields of /proc/<pid>/status counted in kB (VmRSS, VmHWM, …), in KiB; undefined when the process is gone. */
export function statusKiB(pid: number, fields: string[]): Record<string, number> | undefined {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  return Object.fromEntries(fields.map((field) => [field, Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0)]));
}

/** Resident memory of `pids`, in MiB. */
export function rssMiB(pids: number[]): number {
  const kib = pids.reduce((sum, pid) => sum + (statusKiB(pid, ['VmRSS'])?.VmRSS ?? 0), 0);
  return Math.round((kib / 1024) * 10) / 10;
}

/** The children of `pid` (nginx's workers). */
export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

export const round2 = (n: number) => Math.round(n * 100) / 100;

/** A new schema name on the bench's MySQL server: `bench_<random>_<label>`. */
export const throwawaySchema = (label: string) => `bench_${randomBytes(4).toString('hex')}_${label}`;

export const schemaUrl = (schema: string) => `${MYSQL_URL}/${schema}`;

export async function dropSchemas(schemas: string[]): Promise<void> {
  if (schemas.length === 0) return;
  const connection = await mysql.createConnection(MYSQL_URL);
  try {
    for (const schema of schemas) await connection.query(`DROP DATABASE IF EXISTS \`${schema}\``);
  } finally {
    await connection.end();
  }
}

/** Stops the servers and drops the schemas on Ctrl-C too, and then does `more` (removes a bench's files), then exits. */
export function cleanUpOnSignals(schemas: string[], more: () => Promise<void> = async () => undefined): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void stopAll()
        .then(() => dropSchemas(schemas))
        .then(more)
        .finally(() => process.exit(130));
    });
  }
}

/** Asks `url` until the response says it came from the cache (the gateway's and nginx's X-Cache). */
export async function warm(url: string, headers: Record<string, string>): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    if ((await fetch(url, { headers })).headers.get('x-cache') === 'HIT') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${url} never answered from its cache`);
}

/** A gateway's environment without authentication and rate limits, as before the gateway had them. */
export const GUARD_OFF = { AUTH_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false' };

/**
 * A gateway's environment with authentication and rate limits on, and a bearer token for its
 * requests: signed with the development key, with a budget no run reaches, so that what is measured
 * is the cost of checking the token and counting the request, not of refusing it.
 */
export async function guardOn(): Promise<{ env: Record<string, string>; headers: Record<string, string> }> {
  const token = await signDevToken({ scopes: ['products:read'], subject: 'bench', ttlSeconds: 3_600 });
  return {
    env: {
      AUTH_ENABLED: 'true',
      AUTH_PUBLIC_KEY: devPublicKey(),
      RATE_LIMIT_ENABLED: 'true',
      RATE_LIMIT_READS_PER_MINUTE: '1000000000',
    },
    headers: { authorization: `Bearer ${token}` },
  };
}

export function machine() {
  return {
    cpus: os.cpus().length,
    model: os.cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    pinned: pinning ? `servers on core ${pinning.server}, load generator on core ${pinning.load} (taskset)` : 'not pinned',
    loadAverage: os.loadavg().map((n) => Math.round(n * 100) / 100),
  };
}

/**
 * Writes a focused bench's (`npm run bench -- --<name>`) figures to bench/results/<name>.json, with
 * the date, its command and the machine, and says so.
 */
export async function writeResults(name: string, figures: Record<string, unknown>): Promise<void> {
  const out = new URL('results/', import.meta.url);
  const results = { date: new Date().toISOString(), command: `npm run bench -- --${name}`, machine: machine(), ...figures };
  await mkdir(out, { recursive: true });
  await writeFile(new URL(`${name}.json`, out), `${JSON.stringify(results, null, 2)}\n`);
  console.log(`written to bench/results/${name}.json`);
}
