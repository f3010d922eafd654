/**
 * A Redis Cluster master killed (SIGKILL) under a client's reads and writes (`npm run chaos`): two
 * gateway replicas with their cache, in-memory tier and rate limits on the test cluster
 * (test/support/redis-cluster-server.ts), one client writing each user through one replica and
 * reading it at once through both, while the test kills the master of the first user's slot and
 * its replica takes over. Every answer is 2xx, no read is older than the write before it, and once
 * the cluster has failed over, reads are hits again. The killed node is started again afterwards
 * (it rejoins as a replica), so the cluster is whole for whatever runs next.
 */
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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

it('a master killed while a client writes and reads: 0 non-2xx, 0 stale, hits again after the failover', async () => {
  const dir = process.env.TEST_REDIS_CLUSTER_DIR;
  if (!dir) throw new Error('TEST_REDIS_CLUSTER_DIR is not set: this test kills and restarts a node of the cluster the global setup started');
  const [writer, reader] = gateways.map((gateway) => client(gateway.url)) as [ReturnType<typeof client>, ReturnType<typeof client>];
  const locations: string[] = [];
  for (let i = 0; i < USERS; i++) {
    const created = await writer.post('/api/users', { email: `failover${i}-${Date.now()}@example.com`, name: 'Before' });
    expect(created.status).toBe(201);
    locations.push(created.headers.get('location')!);
  }
  const seeds = testCluster().nodes.map((node) => node.port);
  const victimKey = `${process.env.TEST_REDIS_KEY_PREFIX}g:{users:${locations[0]!.split('/').pop()}}`;
  const victim = (await masterOf(victimKey, seeds[0]!))!;
  const survivor = seeds.find((port) => port !== victim)!;
  const pid = await processId(victim);

  const seen = { writes: 0, reads: 0, non2xx: [] as string[], stale: [] as string[], outcomes: new Map<string, number>() };
  const started = Date.now();
  let failedOverAt: number | undefined;
  const failover = (async () => {
    await sleep(KILL_AFTER_MS);
    process.kill(pid, 'SIGKILL');
    const killedAt = Date.now();
    while ((await masterOf(victimKey, survivor)) === victim || (await masterOf(victimKey, survivor)) === undefined) {
      if (Date.now() - killedAt > FAILOVER_WITHIN_MS) throw new Error(`no replica took over from ${victim} within ${FAILOVER_WITHIN_MS} ms`);
      await sleep(100);
    }
    failedOverAt = Date.now();
    return failedOverAt - killedAt;
  })();
  const loading = () => Date.now() - started < LOAD_MS || failedOverAt === undefined || Date.now() - failedOverAt < AFTER_FAILOVER_MS;
  const given = (up: unknown) => Number(/^Round (\d+)$/.exec(String(up))?.[1] ?? -1);
  /** The round each user's last acknowledged write set: a read begun after it must show it or a later one. */
  const acknowledged = new Map<string, number>();
  // Meanwhile another client only reads, through both replicas, all the time (also while a write waits for the failover).
  const onlyReads = (async () => {
    for (let round = 0; loading(); round++) {
      const location = locations[round % USERS]!;
      const through = round % 2 === 0 ? writer : reader;
      const floor = acknowledged.get(location) ?? -1;
      const read = await through.get(location);
      seen.reads++;
      const outcome = read.headers.get('x-cache') ?? 'none';
      seen.outcomes.set(outcome, (seen.outcomes.get(outcome) ?? 0) + 1);
      if (read.status !== 200) seen.non2xx.push(`GET ${read.status} (reads only)`);
      else if (given(read.body.name) < floor && floor >= 0) seen.stale.push(`reads only: ${read.body.name} after Round ${floor} (${outcome})`);
    }
  })();
  for (let round = 0; loading(); round++) {
    const location = locations[round % USERS]!;
    const name = `Round ${round}`;
    const written = await writer.patch(location, { name });
    acknowledged.set(location, round);
    seen.writes++;
    if (written.status !== 200) seen.non2xx.push(`PATCH ${written.status}`);
    for (const [label, through] of [['writer', writer], ['reader', reader]] as const) {
      const read = await through.get(location);
      seen.reads++;
      const outcome = read.headers.get('x-cache') ?? 'none';
      seen.outcomes.set(outcome, (seen.outcomes.get(outcome) ?? 0) + 1);
      if (read.status !== 200) seen.non2xx.push(`GET ${read.status} through the ${label}`);
      else if (read.body.name !== name) seen.stale.push(`${label}: ${read.body.name} after ${name} (${outcome})`);
    }
    if (failedOverAt === undefined && Date.now() - started > KILL_AFTER_MS + FAILOVER_WITHIN_MS) break;
  }
  const failoverMs = await failover;
  await onlyReads;

  // Hits again: the entry comes back into each replica's memory through the new master.
  const location = locations[0]!;
  const outcomesAfter: string[] = [];
  for (let attempt = 0; attempt < 100 && outcomesAfter.slice(-2).join() !== 'HIT,HIT'; attempt++) {
    outcomesAfter.push((await reader.get(location)).headers.get('x-cache') ?? 'none');
    await sleep(20);
  }

  startClusterNode(victim, dir);
  await untilClusterSettled();

  console.log(
    `cluster failover: master :${victim} killed ${KILL_AFTER_MS} ms into the load, a replica took over ${failoverMs} ms later; ` +
      `${seen.writes} writes, ${seen.reads} reads (${[...seen.outcomes].map(([outcome, n]) => `${outcome} × ${n}`).join(', ')}); ` +
      `${seen.non2xx.length} non-2xx, ${seen.stale.length} stale; hits again after ${outcomesAfter.length} reads`,
  );
  expect(seen.non2xx).toEqual([]);
  expect(seen.stale).toEqual([]);
  expect(outcomesAfter.slice(-2)).toEqual(['HIT', 'HIT']);
}, 60_000);
