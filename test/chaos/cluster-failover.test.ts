/**
 * A Redis Cluster master killed (SIGKILL) under a client's reads and writes (`npm run chaos`): two
 * gateway replicas with their cache, in-memory tier and rate limits on the test cluster
 * (test/support/redis-cluster-server.ts), one client writing each user through one replica and
 * reading it at once through both, while the test kills the master of the first user's slot and
 * its replica takes over. Every answer is 2xx, no read is older than the write before it, and once
 * the cluster has failed over, reads are hits again. The killed node is started again afterwards
 * (it rejoins as a replica), so the cluster is whole for whatever runs next.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { client } from '../support/http.js';
import { testCluster } from '../support/redis-cluster.js';
import { startClusterNode, untilClusterSettled } from '../support/redis-cluster-server.js';
import { startGateway, startUsersService, type RunningGateway, type RunningService } from '../support/stack.js';

const USERS = 9;
/** The load runs at least this long, and at least this long after the failover. */
const LOAD_MS = 8_000;
const AFTER_FAILOVER_MS = 3_000;
const KILL_AFTER_MS = 1_500;
const FAILOVER_WITHIN_MS = 15_000;
/** A write that waited out the failover is answered at most this long after the replica took over (docs/architecture.md). */
const WRITE_AFTER_FAILOVER_MS = 1_000;

let users: RunningService;
let gateways: RunningGateway[];

beforeAll(async () => {
  users = await startUsersService();
  gateways = await Promise.all([0, 1].map(() => startGateway({ upstreams: { users: users.url, products: users.url }, cache: { redisUrl: testCluster() } })));
});
afterAll(async () => {
  await Promise.all(gateways.map((gateway) => gateway.close()));
  await users.close();
});

/** The port of the master serving `key`'s slot, as the node on `askPort` sees it. */
async function masterOf(key: string, askPort: number): Promise<number | undefined> {
  const admin = new Redis({ host: '127.0.0.1', port: askPort, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  admin.on('error', () => undefined);
  try {
    const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', key));
    const ranges = (await admin.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
    return ranges.find(([from, to]) => from <= slot && slot <= to)?.[2][1];
  } catch {
    return undefined;
  } finally {
    admin.disconnect();
  }
}

async function processId(port: number): Promise<number> {
  const admin = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0 });
  try {
    return Number(/process_id:(\d+)/.exec(await admin.info('server'))![1]);
  } finally {
    admin.disconnect();
  }
}

/** What the load saw. */
interface Seen {
  writes: number;
  /** When each write was sent and answered (Date.now()). */
  writeTimes: { sentAt: number; answeredAt: number }[];
  reads: number;
  non2xx: string[];
  stale: string[];
  outcomes: Map<string, number>;
}

type Api = ReturnType<typeof client>;

/** The round a name written by the load stands for (`Round 12` → 12), or -1. */
const roundOf = (name: unknown) => Number(/^Round (\d+)$/.exec(String(name))?.[1] ?? -1);

/** Counts a read: its status, its X-Cache, and whether it shows at least the round `floor`. */
function count(seen: Seen, read: Awaited<ReturnType<Api['get']>>, floor: number, label: string): void {
  seen.reads++;
  const outcome = read.headers.get('x-cache') ?? 'none';
  seen.outcomes.set(outcome, (seen.outcomes.get(outcome) ?? 0) + 1);
  if (read.status !== 200) seen.non2xx.push(`GET ${read.status} (${label})`);
  else if (roundOf(read.body.name) < floor) seen.stale.push(`${label}: ${read.body.name} after Round ${floor} (${outcome})`);
}

/**
 * Kills the master of `victimKey`'s slot after KILL_AFTER_MS; resolves with how long its replica
 * took to take over, as the node on `survivor` sees it.
 */
async function killMaster(victimKey: string, victim: number, survivor: number): Promise<number> {
  const pid = await processId(victim);
  await sleep(KILL_AFTER_MS);
  process.kill(pid, 'SIGKILL');
  const killedAt = Date.now();
  for (let master = victim; master === victim || master === undefined; master = (await masterOf(victimKey, survivor))!) {
    if (Date.now() - killedAt > FAILOVER_WITHIN_MS) throw new Error(`no replica took over from ${victim} within ${FAILOVER_WITHIN_MS} ms`);
    await sleep(100);
  }
  return Date.now() - killedAt;
}

/**
 * One client writes the users in turn through `writer` and reads each at once through both
 * replicas; another only reads, through both, all along (also while a write waits out the
 * failover). A read begun after a write was acknowledged must show it or a later one.
 */
async function load(locations: string[], [writer, reader]: [Api, Api], loading: () => boolean): Promise<Seen> {
  const seen: Seen = { writes: 0, writeTimes: [], reads: 0, non2xx: [], stale: [], outcomes: new Map() };
  const acknowledged = new Map<string, number>();
  const onlyReads = (async () => {
    for (let round = 0; loading(); round++) {
      const location = locations[round % locations.length]!;
      const floor = acknowledged.get(location) ?? -1;
      count(seen, await (round % 2 === 0 ? writer : reader).get(location), floor, 'reads only');
    }
  })();
  for (let round = 0; loading(); round++) {
    const location = locations[round % locations.length]!;
    const sentAt = Date.now();
    const written = await writer.patch(location, { name: `Round ${round}` });
    seen.writeTimes.push({ sentAt, answeredAt: Date.now() });
    acknowledged.set(location, round);
    seen.writes++;
    if (written.status !== 200) seen.non2xx.push(`PATCH ${written.status}`);
    count(seen, await writer.get(location), round, 'the writer');
    count(seen, await reader.get(location), round, 'the reader');
  }
  await onlyReads;
  return seen;
}

it('a master killed while a client writes and reads: 0 non-2xx, 0 stale, hits again after the failover', async () => {
  const dir = process.env.TEST_REDIS_CLUSTER_DIR;
  if (!dir) throw new Error('TEST_REDIS_CLUSTER_DIR is not set: this test kills and restarts a node of the cluster the global setup started');
  const apis = gateways.map((gateway) => client(gateway.url)) as [Api, Api];
  const locations: string[] = [];
  for (let i = 0; i < USERS; i++) {
    const created = await apis[0].post('/api/users', { email: `failover${i}-${Date.now()}@example.com`, name: 'Before' });
    expect(created.status).toBe(201);
    locations.push(created.headers.get('location')!);
  }
  const seeds = testCluster().nodes.map((node) => node.port);
  const victimKey = `${process.env.TEST_REDIS_KEY_PREFIX}g:{users:${locations[0]!.split('/').pop()}}`;
  const victim = (await masterOf(victimKey, seeds[0]!))!;

  const started = Date.now();
  let failedOverAt: number | undefined;
  const failover = killMaster(victimKey, victim, seeds.find((port) => port !== victim)!).then((ms) => {
    failedOverAt = Date.now();
    return ms;
  });
  // Until LOAD_MS and AFTER_FAILOVER_MS after the failover have passed (or the failover failed).
  const loading = () => (Date.now() - started < LOAD_MS || failedOverAt === undefined || Date.now() - failedOverAt < AFTER_FAILOVER_MS) && Date.now() - started < KILL_AFTER_MS + FAILOVER_WITHIN_MS + AFTER_FAILOVER_MS;
  const seen = await load(locations, apis, loading);
  const failoverMs = await failover;

  // Hits again: the entry comes back into the reader's memory through the new master.
  const outcomesAfter: string[] = [];
  for (let attempt = 0; attempt < 100 && outcomesAfter.slice(-2).join() !== 'HIT,HIT'; attempt++) {
    outcomesAfter.push((await apis[1].get(locations[0]!)).headers.get('x-cache') ?? 'none');
    await sleep(20);
  }

  startClusterNode(victim, dir);
  await untilClusterSettled();

  console.log(
    `cluster failover: master :${victim} killed ${KILL_AFTER_MS} ms into the load, a replica took over ${failoverMs} ms later; ` +
      `${seen.writes} writes, ${seen.reads} reads (${[...seen.outcomes].map(([outcome, n]) => `${outcome} × ${n}`).join(', ')}); ` +
      `${seen.non2xx.length} non-2xx, ${seen.stale.length} stale; hits again after ${outcomesAfter.length} reads; ` +
      `writes answered after the takeover: ${seen.writeTimes.filter(({ sentAt }) => sentAt <= failedOverAt!).map(({ answeredAt }) => answeredAt - failedOverAt!).filter((ms) => ms > 0).join(', ')} ms`,
  );
  // A write under way when the replica took over is answered within WRITE_AFTER_FAILOVER_MS of it
  // (failedOverAt is when the test saw it, up to 100 ms after the fact).
  const late = seen.writeTimes.filter(({ sentAt, answeredAt }) => sentAt <= failedOverAt! && answeredAt - failedOverAt! > WRITE_AFTER_FAILOVER_MS);
  expect(late.map(({ sentAt, answeredAt }) => `sent ${sentAt - failedOverAt!} ms, answered ${answeredAt - failedOverAt!} ms from the takeover`)).toEqual([]);
  expect(seen.non2xx).toEqual([]);
  expect(seen.stale).toEqual([]);
  expect(outcomesAfter.slice(-2)).toEqual(['HIT', 'HIT']);
}, 60_000);
