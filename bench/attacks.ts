/**
 * `npm run bench:attacks`: the resource bounds of issue 44's "Done when", checked. Four attacks (big
 * pages refilled, held connections, a slow metrics body, an invalid body flood), each against a
 * gateway of its own (auth and rate limits on, as deployed) in front of every listed service, with
 * a normal client reading beside it; the gateway's RSS is sampled during the attack and until 30 s
 * after it, its event-loop delay measured by bench/loop-probe.ts. Prints each bound's verdict and
 * exits 1 when any is missed. Settings and method: docs/performance.md.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { Redis } from 'ioredis';
import { readServiceList } from '../shared/src/platform/services.ts';
import { devPublicKey, signDevToken } from '../tools/dev-token.ts';
import { ATTACK_RUNS, type Target } from './attack-loads.ts';
import type { NormalClient } from './attack-normal-client.ts';
import { agentFrom, send } from './attack-sockets.ts';
import { bigDescription, connectionsWithin, missedBounds, openFilesLimit, reportLines, settingsFrom, summariseReads, type AttackName, type Observed, type Read, type Settings } from './attack-stats.ts';
import { loopDelay, startProbed, type Probed } from './load-probes.ts';
import { cleanUpOnSignals, dropSchemas, pinning, REDIS_URL, schemaUrl, settle, statusKiB, stopAll, stopServer, throwawaySchema } from './support.ts';

/** The attacker's source address; the normal client comes from 127.0.0.1. Both are loopback. */
const ATTACKER_ADDRESS = '127.0.0.2';
const SAMPLE_MS = 100;
const CORES = pinning ? { gateway: pinning.server, others: pinning.load } : undefined;

const settings = settingsFrom(process.env);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const mib = (kib: number | undefined) => Math.round(((kib ?? 0) / 1024) * 10) / 10;

interface Run {
  tag: string;
  schemas: string[];
  services: Probed[];
  /** The gateways started so far, each with its own Redis key prefix. */
  prefixes: string[];
  tokens: { attacker: string; normal: string };
  productIds: string[];
  beforeProductsMs: number;
  normalUserId: string;
}

async function startGateway(run: Run, n: number): Promise<Probed> {
  const prefix = `bench-attacks-${run.tag}-${n}:`;
  run.prefixes.push(prefix);
  const services = readServiceList();
  return startProbed('gateway', 'gateway/dist/main.js', {
    core: CORES?.gateway,
    env: {
      GATEWAY_UPSTREAMS: services.map(({ name }, i) => `${name}=${run.services[i]!.url}`).join(','),
      REDIS_URL,
      REDIS_KEY_PREFIX: prefix,
      HOST: '127.0.0.1',
      // Unset (empty): the gateway's own per-address cap, which the load bench's one-address client turns off.
      MAX_CONNECTIONS_PER_ADDRESS: '',
      AUTH_ENABLED: 'true',
      AUTH_PUBLIC_KEY: devPublicKey(),
      RATE_LIMIT_ENABLED: 'true',
    },
  });
}

/** `count` products with descriptions of 5,000 pictographs, straight into products-service, 25 at a time; their ids. */
async function createProducts(products: Probed, tag: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let batch = 0; batch < count; batch += 25) {
    const created = await Promise.all(
      Array.from({ length: Math.min(25, count - batch) }, async (_, i) => {
        const n = batch + i;
        const body = { sku: `ATTACK-${tag}-${n}`, name: `Attack product ${n}`, description: bigDescription(5_000), price: { amount: '9.99', currency: 'EUR' }, stock: n };
        const response = await fetch(`${products.url}/api/products`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        if (response.status !== 201) throw new Error(`creating a product: ${response.status} ${await response.text()}`);
        return ((await response.json()) as { id: string }).id;
      }),
    );
    ids.push(...created);
  }
  return ids;
}

/**
 * The normal client's reads, in turn: a product, its own user, and a lookup of one of its users by
 * an email never asked before (`{i}`, the read's number: a cache miss each time, so that a busy
 * service shows).
 */
const normalPaths = (run: Run) =>
  run.productIds.slice(0, 10).flatMap((id) => [`/api/products/${id}`, `/api/users/${run.normalUserId}`, `/api/users?email=lookup-{i}-${run.tag}%40example.com`]);

/** The normal client (bench/attack-normal-client.ts, a thread of its own) reading `gateway` until `stop` (or `seconds`); every read's time. */
function normalClient(run: Run, gateway: Probed, seconds: number) {
  const client: NormalClient = { port: Number(new URL(gateway.url).port), token: run.tokens.normal, paths: normalPaths(run), perSecond: settings.normalPerSecond, seconds };
  const worker = new Worker(new URL('./attack-normal-client.ts', import.meta.url), { workerData: client });
  const reads = new Promise<Read[]>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the normal client exited (${code}) without its reads`)));
  });
  return async (): Promise<Read[]> => {
    worker.postMessage('stop');
    return reads.finally(() => worker.terminate());
  };
}

/** Samples the gateway's VmRSS every 100 ms until `stop`, which gives the highest sample and the process's VmHWM, in MiB. */
function sampleRss(pid: number) {
  let peak = 0;
  const timer = setInterval(() => (peak = Math.max(peak, mib(statusKiB(pid, ['VmRSS'])?.VmRSS))), SAMPLE_MS);
  return () => {
    clearInterval(timer);
    return Math.max(peak, mib(statusKiB(pid, ['VmHWM'])?.VmHWM));
  };
}

/** A few reads by the normal client, so that the gateway under attack is a warm one. */
async function warmUp(run: Run, gateway: Probed): Promise<void> {
  const agent = agentFrom('127.0.0.1');
  const port = Number(new URL(gateway.url).port);
  const headers = { authorization: `Bearer ${run.tokens.normal}` };
  for (const path of normalPaths(run)) await send({ agent, port, method: 'GET', path: path.replace('{i}', 'warm-up'), headers });
  agent.destroy();
}

/** The longest an attack runs by its settings, plus a margin for its last answers: the normal client's bound. */
const longestSeconds = (s: Settings) => Math.max(s.pages.seconds, s.connections.seconds, s.metricsBody.seconds, s.invalidBodies.seconds) + 60;

/** One attack against a gateway of its own: what it did, and what was seen of the gateway. */
async function runAttack(run: Run, name: AttackName, n: number): Promise<{ did: string; observed: Observed }> {
  const gateway = await startGateway(run, n);
  try {
    const pid = gateway.child.pid!;
    await warmUp(run, gateway);
    await settle();
    const rssStartMiB = mib(statusKiB(pid, ['VmRSS'])?.VmRSS);
    const peak = sampleRss(pid);
    await loopDelay(gateway); // from here
    const stopNormal = normalClient(run, gateway, longestSeconds(settings));
    const target: Target = {
      port: Number(new URL(gateway.url).port),
      metricsPort: Number(new URL(gateway.metricsUrl).port),
      attackerAddress: ATTACKER_ADDRESS,
      attackerToken: run.tokens.attacker,
      productIds: run.productIds,
      beforeProductsMs: run.beforeProductsMs,
    };
    // The lag is asked for as soon as the attack's sockets are closed: its p99 is the attack's.
    const outcome = await ATTACK_RUNS[name](target, settings)
      .then(async (did) => ({ did, lag: await loopDelay(gateway) }))
      .catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
    const reads = summariseReads(await stopNormal());
    if (outcome instanceof Error) throw outcome;
    const { did, lag } = outcome;
    console.log(`  ${name}: done (${did}); ${settings.afterSeconds} s until the RSS is read again …`);
    await sleep(settings.afterSeconds * 1000);
    const rssAfterMiB = mib(statusKiB(pid, ['VmRSS'])?.VmRSS);
    const running = gateway.child.exitCode === null && gateway.child.signalCode === null;
    return { did, observed: { rssStartMiB, rssPeakMiB: peak(), rssAfterMiB, lagP99Ms: lag?.p99Ms, reads, running } };
  } finally {
    await stopServer(gateway);
  }
}

/** The held-connection attacks' counts within this script's open-file limit, and a line saying so when that cut them. */
function withinFileLimit(s: Settings): string | undefined {
  const limit = openFilesLimit(readFileSync('/proc/self/limits', 'utf8'));
  const wanted = { connections: s.connections.count, metrics: s.metricsBody.count };
  s.connections.count = connectionsWithin(wanted.connections, limit);
  s.metricsBody.count = connectionsWithin(wanted.metrics, limit);
  if (s.connections.count === wanted.connections && s.metricsBody.count === wanted.metrics) return undefined;
  return `open-file limit ${limit} (ulimit -n; its hard limit is the most npm run bench:attacks can raise it to): held connections cut to ${s.connections.count} (of ${wanted.connections}), metrics bodies to ${s.metricsBody.count} (of ${wanted.metrics})`;
}

/** Every listed service on its schema, the products, the tokens and the normal client's own user. */
async function prepare(run: Run): Promise<void> {
  const services = readServiceList();
  run.services = await Promise.all(
    // Fatal only: the 503s an attack makes a service answer are expected, and a line each would bury the report.
    services.map(({ workspace }, i) => startProbed(workspace, `${workspace}/dist/main.js`, { env: { DATABASE_URL: schemaUrl(run.schemas[i]!), LOG_LEVEL: 'fatal' }, core: CORES?.others })),
  );
  const sign = (subject: string) =>
    signDevToken({ scopes: services.flatMap(({ name }) => [`${name}:read`, `${name}:write`]), subject: `${subject}-${run.tag}`, ttlSeconds: 3_600 });
  run.tokens = { attacker: await sign('attacker'), normal: await sign('normal') };
  run.beforeProductsMs = Date.now() - 1_000;
  const products = run.services[services.findIndex(({ name }) => name === 'products')]!;
  run.productIds = await createProducts(products, run.tag, settings.attacks.includes('pages') ? settings.pages.products : 10);
  const gateway = await startGateway(run, 0);
  try {
    const created = await fetch(`${gateway.url}/api/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${run.tokens.normal}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: `normal-${run.tag}@example.com`, name: 'Normal client' }),
    });
    if (created.status !== 201) throw new Error(`creating the normal client's user: ${created.status} ${await created.text()}`);
    run.normalUserId = ((await created.json()) as { id: string }).id;
  } finally {
    await stopServer(gateway);
  }
}

/** Deletes every key of the gateways' prefixes (their cache entries and rate-limit counters). */
async function dropRedisKeys(prefixes: string[]): Promise<void> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true });
  await redis.connect();
  try {
    for (const prefix of prefixes) {
      for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 1_000 }) as AsyncIterable<string[]>) if (keys.length > 0) await redis.unlink(...keys);
    }
  } finally {
    redis.disconnect();
  }
}

async function main(): Promise<number> {
  if (CORES) execFileSync('taskset', ['-a', '-cp', CORES.others, String(process.pid)], { stdio: 'ignore' });
  const cut = withinFileLimit(settings);
  const schemas = readServiceList().map(({ name }) => throwawaySchema(name));
  const run = { tag: schemas[0]!.split('_')[1]!, schemas, services: [], prefixes: [], tokens: { attacker: '', normal: '' }, productIds: [], beforeProductsMs: 0, normalUserId: '' } as Run;
  cleanUpOnSignals(schemas);
  console.log(`attacks: ${settings.attacks.join(', ')}; ${os.cpus().length} × ${os.cpus()[0]?.model}, Node ${process.version}, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  if (cut) console.log(cut);
  const results: { name: AttackName; observed: Observed }[] = [];
  try {
    await prepare(run);
    for (const [i, name] of settings.attacks.entries()) {
      console.log(`\n${name} …`);
      const { did, observed } = await runAttack(run, name, i + 1);
      console.log(reportLines(name, did, observed, settings.afterSeconds).join('\n'));
      results.push({ name, observed });
    }
  } finally {
    for (const server of run.services) await stopServer(server);
    await stopAll();
    await dropSchemas(schemas);
    await dropRedisKeys(run.prefixes);
  }
  const missed = missedBounds(results);
  console.log(missed.length === 0 ? '\nevery bound held' : `\nbounds missed:\n${missed.map((m) => `  ${m}`).join('\n')}`);
  return missed.length === 0 ? 0 : 1;
}

process.exitCode = await main();
