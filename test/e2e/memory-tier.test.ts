/**
 * The in-memory tier in front of Redis (gateway/src/cache/memory-tier.ts), as clients see it: hits
 * without a round trip, a write through one gateway replica evicting the entry from another's
 * memory (STALE_CHECK_ROUNDS writes, 0 stale reads; every one of INVALIDATION_SAMPLES invalidations
 * arriving), and the tier dropped while either of its Redis connections is cut, never stale when it
 * comes back. Real gateways, real users service, real Redis (cut through TCP proxies the test
 * controls). `npm run bench:invalidation` runs it with 10,000 of each, and reports how long the
 * invalidations took (INVALIDATION_REPORT=true): a figure for the bench, not a check.
 */
import { createCacheClient, type CacheClient } from '../../gateway/src/redis/client.js';
import { decode, encode } from '../../gateway/src/cache/entry.js';
import { readKeyingOf } from '../../gateway/src/cache/keys.js';
import { DEFAULT_SUBJECT } from '../support/auth.js';
import type { MemoryTier } from '../../gateway/src/cache/memory-tier.js';
import { countFromEnv } from '../../tools/env.js';
import { client, metricsOf, type Client } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { startGateway, startUsersService, testLogger, untilTracking, type RunningGateway, type RunningService } from '../support/stack.js';
import { onCluster, relayRedis, testRedisTarget, type RedisRelay } from '../support/redis-cluster.js';

const STALE_CHECK_ROUNDS = countFromEnv('STALE_CHECK_ROUNDS', 300);
const INVALIDATION_SAMPLES = countFromEnv('INVALIDATION_SAMPLES', 1_000);
const RELAY_STALE_CHECK_ROUNDS = countFromEnv('RELAY_STALE_CHECK_ROUNDS', 1_000);
/** How long an invalidation may take to reach another replica before the test calls it lost: a hang guard, not a speed target. */
const INVALIDATION_LOST_MS = 5_000;
const RELAY_DELAY_MS = 3;

let users: RunningService;
let gateway: RunningGateway;
let api: Client;
let redis: CacheClient;
let counter = 0;

beforeAll(async () => {
  users = await startUsersService();
  gateway = await startGateway({ upstreams: { users: users.url, products: users.url }, cache: {} });
  api = client(gateway.url);
  redis = createCacheClient(testRedisTarget(), testLogger, { commandTimeoutMs: 2_000, keyPrefix: process.env.TEST_REDIS_KEY_PREFIX });
  await new Promise((resolve) => redis.once('ready', resolve));
});
afterAll(async () => {
  redis.disconnect();
  await gateway.close();
  await users.close();
});

const memoryOf = (running: RunningGateway): MemoryTier => running.cache!.memory!;
const idOf = (location: string) => location.split('/').pop()!;
/** The cache entry of the default caller's read of a user: users are cached per caller (services.json: "owner": "all"). */
const itemKeying = (location: string) => readKeyingOf(`users:${idOf(location)}`, '', DEFAULT_SUBJECT);

async function createUser(through: Client = api) {
  const n = ++counter;
  const created = await through.post('/api/users', { email: `memory${n}-${Date.now()}@example.com`, name: `Held ${n}` });
  expect(created.status).toBe(201);
  return { location: created.headers.get('location')!, body: created.body };
}

/** Reads `location` through `through` until `running`'s memory holds it (at most 50 reads). */
async function untilHeld(running: RunningGateway, through: Client, location: string) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const read = await through.get(location);
    expect(read.status).toBe(200);
    if (memoryOf(running).held(itemKeying(location))) return read;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`${location} never came into memory`);
}

/** Waits (at most 2 s) until `running`'s memory no longer holds `location`. */
async function untilDropped(running: RunningGateway, location: string) {
  for (let attempt = 0; attempt < 100 && memoryOf(running).held(itemKeying(location)); attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(memoryOf(running).held(itemKeying(location))).toBeUndefined();
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
const micros = (ms: number) => `${Math.round(ms * 1000)} µs`;

describe('hits from memory', () => {
  it('answers a held entry without asking Redis: HIT, same headers, 304 and HEAD too', async () => {
    const user = await createUser();
    await untilHeld(gateway, api, user.location);
    // Change what Redis holds behind the gateway's back (same generation): only a Redis hit would see it.
    const key = itemKeying(user.location).entryKey;
    const stored = decode((await redis.getBuffer(key))!)!;
    await redis.set(key, encode({ ...stored, body: Buffer.from(JSON.stringify({ ...user.body, name: 'Only in Redis' })) }), 'EX', 60);

    const hit = await api.get(user.location);
    expect(hit.headers.get('x-cache')).toBe('HIT');
    expect(hit.headers.get('age')).not.toBeNull();
    expect(hit.headers.get('x-request-id')).not.toBeNull();
    expect(hit.body).toEqual(user.body);
    const etag = hit.headers.get('etag')!;
    expect((await api.get(user.location, { headers: { 'if-none-match': etag } })).status).toBe(304);
    const head = await api.head(user.location);
    expect({ status: head.status, cache: head.headers.get('x-cache'), text: head.text }).toEqual({ status: 200, cache: 'HIT', text: '' });
  });

  it('answers a hit with the entry’s headers and its own: the request id, X-Cache, Age, Content-Length (none of them twice)', async () => {
    const user = await createUser();
    await untilHeld(gateway, api, user.location);
    const hit = await api.get(user.location, { headers: { 'x-request-id': 'hit-from-memory-1' } });
    expect(hit.headers.get('x-cache')).toBe('HIT');
    expect(hit.headers.get('x-request-id')).toBe('hit-from-memory-1');
    expect(hit.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(hit.headers.get('content-length')).toBe(String(Buffer.byteLength(hit.text)));
    expect(hit.headers.get('age')).toMatch(/^\d+$/);
    const etag = hit.headers.get('etag')!;
    expect(etag).toMatch(/^"\d+"$/);
    const notModified = await api.get(user.location, { headers: { 'if-none-match': etag } });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.get('content-type')).toBeNull();
    expect(notModified.headers.get('etag')).toBe(etag);
    expect(notModified.headers.get('x-cache')).toBe('HIT');
    expect(notModified.headers.get('x-request-id')).toMatch(/^[A-Za-z0-9._-]+$/);
    const head = await api.head(user.location);
    expect(head.headers.get('content-length')).toBe(hit.headers.get('content-length'));
  });

  it('counts every hit from memory in /metrics, once', async () => {
    const user = await createUser();
    await untilHeld(gateway, api, user.location);
    const counts = async () => {
      const metrics = readMetrics(await metricsOf(gateway));
      return {
        hits: metrics.value('gateway_cache_outcomes_total', { outcome: 'hit' }),
        reads: metrics.value('gateway_http_requests_total', { route: '/api/users/{id}', method: 'GET', status: '200' }),
      };
    };
    const before = await counts();
    for (let i = 0; i < 5; i++) expect((await api.get(user.location)).headers.get('x-cache')).toBe('HIT');
    const after = await counts();
    expect({ hits: after.hits - before.hits, reads: after.reads - before.reads }).toEqual({ hits: 5, reads: 5 });
    expect(await counts()).toEqual(after);
  });

  it('learns an entry from the lookup that found it, and a fill from the lookup that missed: no second read of the generation', async () => {
    const proxy = await relayRedis();
    const replica = await startGateway({ upstreams: { users: users.url, products: users.url }, cache: { memoryRedisUrls: { subscriber: testRedisTarget(), tracked: proxy.target } } });
    const through = client(replica.url);
    try {
      const filledHere = await createUser();
      await api.get(filledHere.location); // the item has a generation…
      expect((await api.patch(filledHere.location, { name: 'Renewed' })).status).toBe(200); // …and a new one since its entry
      const filledElsewhere = await createUser();
      await api.get(filledElsewhere.location); // another replica fills Redis
      for (let attempt = 0; attempt < 50 && (await redis.exists(itemKeying(filledElsewhere.location).entryKey)) === 0; attempt++) await new Promise((resolve) => setTimeout(resolve, 10));

      // From now on nothing read on the tier's own connection comes back in time: whatever the
      // replica learns, it learns from its lookups on the cache's connection.
      proxy.replyDelayMs = 10_000;
      expect((await through.get(filledHere.location)).headers.get('x-cache')).toBe('MISS');
      expect(memoryOf(replica).held(itemKeying(filledHere.location))).toBeDefined();
      expect((await through.get(filledHere.location)).headers.get('x-cache')).toBe('HIT');

      expect((await through.get(filledElsewhere.location)).headers.get('x-cache')).toBe('HIT');
      expect(memoryOf(replica).held(itemKeying(filledElsewhere.location))).toBeDefined();

      // What it learnt that way is still dropped by a write through another replica.
      expect((await api.patch(filledHere.location, { name: 'Written elsewhere' })).status).toBe(200);
      await untilDropped(replica, filledHere.location);
      expect((await through.get(filledHere.location)).body.name).toBe('Written elsewhere');
    } finally {
      proxy.replyDelayMs = 0;
      await replica.close();
      await proxy.cut();
    }
  });

  it('keeps no more bytes than it is given, least recently used out first', async () => {
    const small = await startGateway({ upstreams: { users: users.url, products: users.url }, cache: { memoryBytes: 2_000 } });
    const through = client(small.url);
    try {
      const created = [];
      for (let i = 0; i < 6; i++) created.push(await createUser(through));
      for (const user of created) await untilHeld(small, through, user.location);
      expect(memoryOf(small).heldBytes).toBeLessThanOrEqual(2_000);
      expect(memoryOf(small).held(itemKeying(created[0]!.location))).toBeUndefined();
      expect(memoryOf(small).held(itemKeying(created[5]!.location))).toBeDefined();
    } finally {
      await small.close();
    }
  });
});

describe('a write through one replica evicts the entry from every replica’s memory', () => {
  it(
    `write through one replica, read through the other at once: ${STALE_CHECK_ROUNDS} rounds, 0 stale reads`,
    async () => {
      const other = await startGateway({ upstreams: { users: users.url, products: users.url }, cache: {} });
      const writer = client(other.url);
      try {
        const user = await createUser();
        let stale = 0;
        for (let round = 0; round < STALE_CHECK_ROUNDS; round++) {
          await untilHeld(gateway, api, user.location); // this replica answers it from memory
          const name = `Round ${round}`;
          expect((await writer.patch(user.location, { name })).status).toBe(200);
          const read = await api.get(user.location);
          if (read.body.name !== name) stale++;
        }
        console.log(`memory tier: ${STALE_CHECK_ROUNDS} writes through one replica, each read at once through another that held the entry: ${stale} stale reads`);
        expect(stale).toBe(0);
      } finally {
        await other.close();
      }
    },
    60_000 + STALE_CHECK_ROUNDS * 50,
  );

  it(
    `through relays, the invalidations lagging by ${RELAY_DELAY_MS} ms: ${RELAY_STALE_CHECK_ROUNDS} writes through one replica, each read at once through another, 0 stale`,
    async () => {
      // Every connection of the reading replica goes through a relay, as through a sidecar or a
      // managed Redis's front end; what Redis sends its subscriber (the invalidations) comes late.
      const relays = await Promise.all([0, 0, RELAY_DELAY_MS].map(async (delay) => {
        const relay = await relayRedis();
        relay.replyDelayMs = delay;
        return relay;
      }));
      const [cacheRelay, trackedRelay, subscriberRelay] = relays as [RedisRelay, RedisRelay, RedisRelay];
      const reader = await startGateway({
        upstreams: { users: users.url, products: users.url },
        cache: { redisUrl: cacheRelay.target, memoryRedisUrls: { tracked: trackedRelay.target, subscriber: subscriberRelay.target } },
      });
      const through = client(reader.url);
      try {
        await untilTracking(memoryOf(reader), true);
        const user = await createUser();
        let stale = 0;
        for (let round = 0; round < RELAY_STALE_CHECK_ROUNDS; round++) {
          await untilHeld(reader, through, user.location);
          const name = `Relayed ${round}`;
          expect((await api.patch(user.location, { name })).status).toBe(200);
          const read = await through.get(user.location);
          if (read.body.name !== name) stale++;
        }
        console.log(`memory tier through relays (+${RELAY_DELAY_MS} ms on invalidations): ${RELAY_STALE_CHECK_ROUNDS} writes, each read at once through another replica: ${stale} stale reads`);
        expect(stale).toBe(0);
      } finally {
        await reader.close();
        await Promise.all(relays.map((relay) => relay.cut()));
      }
    },
    60_000 + RELAY_STALE_CHECK_ROUNDS * 100,
  );

  it('a hold set through another replica (a write of unknown outcome) stops this one answering from memory', async () => {
    const user = await createUser();
    await untilHeld(gateway, api, user.location);
    const { holdKey } = itemKeying(user.location);
    await redis.set(holdKey, '1', 'PX', 5_000);
    try {
      await untilDropped(gateway, user.location);
      expect((await api.get(user.location)).headers.get('x-cache')).toBe('BYPASS');
    } finally {
      await redis.del(holdKey);
    }
  });

  it(`an invalidation reaches another replica and drops its entry, every one of ${INVALIDATION_SAMPLES} writes`, async () => {
    const memory = memoryOf(gateway);
    const scope = { entryKey: 'c:{users:latency-probe}:', generationKey: 'g:{users:latency-probe}', holdKey: 'h:{users:latency-probe}' };
    const reached: number[] = [];
    const replied: number[] = [];
    let arrived: ((at: number) => void) | undefined;
    const stopListening = memory.onInvalidation((keys) => {
      if (keys.includes(scope.generationKey)) arrived?.(performance.now());
    });
    try {
      for (let sample = 0; sample < INVALIDATION_SAMPLES; sample++) {
        const generation = `probe-${sample}`;
        await redis.set(scope.generationKey, generation, 'EX', 60);
        // The replica learns the generation on its tracked connection, as it does after a Redis hit
        // (again if that read failed: a 100 ms command timeout on a busy machine).
        const entry = { generation, storedAt: Date.now(), status: 200, headers: {}, body: Buffer.from('{}') };
        const learning = performance.now();
        for (let attempt = 0; attempt < 20 && !memory.held(scope); attempt++) {
          memory.learn(scope, entry);
          while (!memory.held(scope) && performance.now() - learning < (attempt + 1) * 200) await new Promise((resolve) => setImmediate(resolve));
        }
        expect({ sample, held: memory.held(scope) !== undefined }).toEqual({ sample, held: true });
        let lost: NodeJS.Timeout | undefined;
        const invalidation = Promise.race([
          new Promise<number>((resolve) => (arrived = resolve)),
          new Promise<never>((_resolve, reject) => (lost = setTimeout(() => reject(new Error(`sample ${sample}: no invalidation within ${INVALIDATION_LOST_MS} ms`)), INVALIDATION_LOST_MS))),
        ]);
        const sent = performance.now();
        // What a gateway does for a write: renew the generation.
        await redis.set(scope.generationKey, `${generation}-renewed`, 'EX', 60);
        replied.push(performance.now() - sent);
        try {
          reached.push((await invalidation) - sent);
        } finally {
          clearTimeout(lost);
        }
        expect(memory.held(scope)).toBeUndefined();
      }
    } finally {
      stopListening();
    }
    expect(reached).toHaveLength(INVALIDATION_SAMPLES);
    if (process.env.INVALIDATION_REPORT === 'true') {
      reached.sort((a, b) => a - b);
      replied.sort((a, b) => a - b);
      console.log(
        `invalidation latency over ${INVALIDATION_SAMPLES} writes, from sending the renewal to the other replica dropping the entry: ` +
          `p50 ${micros(percentile(reached, 50))}, p99 ${micros(percentile(reached, 99))}, max ${micros(reached.at(-1)!)}; ` +
          `the writer's own round trip: p50 ${micros(percentile(replied, 50))}, p99 ${micros(percentile(replied, 99))}`,
      );
    }
  }, 60_000 + INVALIDATION_SAMPLES * 20);
});

describe('a lost connection drops the whole tier until tracking is back', () => {
  it('a subscriber that stops answering (a silent network loss) counts as lost within the heartbeat', async () => {
    const proxy = await relayRedis();
    const replica = await startGateway({
      upstreams: { users: users.url, products: users.url },
      cache: { memoryRedisUrls: { subscriber: proxy.target, tracked: testRedisTarget() } },
    });
    const through = client(replica.url);
    try {
      const user = await createUser();
      await untilHeld(replica, through, user.location);
      proxy.replyDelayMs = 10_000; // nothing Redis sends the subscriber arrives, invalidations included
      await untilTracking(memoryOf(replica), false);
      expect(memoryOf(replica).heldBytes).toBe(0);
      expect((await api.patch(user.location, { name: 'Written while silent' })).status).toBe(200);
      expect((await through.get(user.location)).body.name).toBe('Written while silent');
    } finally {
      proxy.replyDelayMs = 0;
      await replica.close();
      await proxy.cut();
    }
  });

  it.each(['subscriber', 'tracked'] as const)('the %s connection: Redis round trips meanwhile, never stale afterwards', async (cutOne) => {
    const proxy = await relayRedis();
    const viaProxy = proxy.target;
    const replica = await startGateway({
      upstreams: { users: users.url, products: users.url },
      cache: { memoryRedisUrls: cutOne === 'subscriber' ? { subscriber: viaProxy, tracked: testRedisTarget() } : { subscriber: testRedisTarget(), tracked: viaProxy } },
    });
    const through = client(replica.url);
    const memory = memoryOf(replica);
    try {
      const user = await createUser();
      await untilHeld(replica, through, user.location);

      await proxy.cut();
      await untilTracking(memory, false);
      expect(memory.heldBytes).toBe(0);
      // Written through another replica: the invalidation cannot reach this one.
      expect((await api.patch(user.location, { name: 'Written while cut' })).status).toBe(200);
      const during = await through.get(user.location);
      expect(during.body.name).toBe('Written while cut');
      expect(memory.held(itemKeying(user.location))).toBeUndefined();

      await proxy.restore();
      await untilTracking(memory);
      expect((await through.get(user.location)).body.name).toBe('Written while cut');
      // Invalidations reach it again (here through the proxy: one more hop than the write's own reply takes).
      await untilHeld(replica, through, user.location);
      expect((await api.patch(user.location, { name: 'Written after' })).status).toBe(200);
      await untilDropped(replica, user.location);
      expect((await through.get(user.location)).body.name).toBe('Written after');
    } finally {
      await replica.close();
      await proxy.cut();
    }
  });

  it('comes back within a few turns of a busy event loop once Redis returns: Redis judged up, tracking on, hits again', async () => {
    const proxy = await relayRedis();
    // Every connection through the proxy: the cache's and the tier's two, as one Redis outage cuts them all.
    const replica = await startGateway({ upstreams: { users: users.url, products: users.url }, cache: { redisUrl: proxy.target } });
    const through = client(replica.url);
    const memory = memoryOf(replica);
    const cache = replica.cache!;
    let busy: BusyEventLoop | undefined;
    try {
      const user = await createUser();
      await untilHeld(replica, through, user.location);
      const connections = proxy.clients;
      await proxy.cut();
      await untilTracking(memory, false);
      // A cluster client notices its nodes are gone a moment after the tier does.
      for (let attempt = 0; attempt < 100 && cache.state.redisUp; attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(cache.state.redisUp).toBe(false);

      // The gateway runs in this process: from now on each turn of its event loop first spends
      // 200 ms in a timer, as a gateway answering 1,000 connections spends it on their requests.
      // Each round trip Redis needs before the cache is back costs such a turn. The turns are
      // counted once the proxy listens again: what its own restart costs is this test's, not the gateway's.
      busy = busyEventLoop(200);
      const sent = new Set<string>();
      proxy.tamper = (bytes) => {
        for (const command of commandsIn(bytes)) sent.add(command);
        return bytes;
      };
      await proxy.restore();
      // Every connection the proxy had before the cut, open again: the reconnection back-off's part.
      const reconnected = busy.turnsUntil(() => proxy.clients >= connections, 30).catch((error: Error) => error);
      const turns = await busy.turnsUntil(() => cache.state.redisUp && memory.tracking, 30);
      const reconnectedTurns = await reconnected;
      if (reconnectedTurns instanceof Error) throw reconnectedTurns;
      busy.stop();
      proxy.tamper = undefined;
      // What turns tracking on, and nothing more: no ready check (INFO) or client-name handshake
      // before it. The heartbeat's PING may come meanwhile; a cluster client asks for the topology
      // on a connection ioredis names first (its refresher's CLIENT SETNAME), and sends READONLY on
      // a replica's connection if that one comes back meanwhile.
      sent.delete('PING');
      sent.delete('READONLY');
      const expected = ['CLIENT ID', 'SUBSCRIBE', 'CLIENT TRACKING'];
      expect([...sent].sort()).toEqual((onCluster() ? [...expected, 'CLIENT SETNAME', 'CLUSTER MYID', 'CLUSTER SLOTS'] : expected).sort());
      // Reconnecting takes an attempt refused just before the proxy listened, a back-off of at most
      // a turn, and the connect: a few turns; a back-off of a second adds five. Then two round trips,
      // CLIENT ID with SUBSCRIBE, then CLIENT TRACKING; through this test's proxy, which runs in
      // this process too, a round trip costs three turns, or four when Redis on a loaded machine
      // answers after the next poll. A cluster takes two round trips more (CLUSTER SLOTS on a
      // connection of its own, each master's CLUSTER MYID) and its masters' connections come back
      // one after another. The commands above say no handshake came back; these bounds, that no
      // longer back-off did, and that nothing hangs.
      expect(reconnectedTurns).toBeLessThanOrEqual(6);
      expect(turns).toBeLessThanOrEqual(onCluster() ? 20 : 14);
      const read = await untilHeld(replica, through, user.location);
      expect({ status: read.status, cache: read.headers.get('x-cache') }).toEqual({ status: 200, cache: 'HIT' });
    } finally {
      busy?.stop();
      await replica.close();
      await proxy.cut();
    }
  });
});

interface BusyEventLoop {
  /** The busy turns from this call until `done()` held, checked after each turn; rejects after `maxTurns`. */
  turnsUntil(done: () => boolean, maxTurns: number): Promise<number>;
  /** Stops the busy turns and every wait still checking. */
  stop(): void;
}

/** Makes every turn of this process's event loop spend `ms` in a timer (its timers phase), until stopped. */
function busyEventLoop(ms: number): BusyEventLoop {
  let turns = 0;
  const timer = setInterval(() => {
    turns += 1;
    const until = performance.now() + ms;
    while (performance.now() < until);
  }, 1);
  const checks = new Set<NodeJS.Timeout>();
  return {
    turnsUntil: (done, maxTurns) =>
      new Promise((resolve, reject) => {
        const from = turns;
        const check = setInterval(() => {
          if (done()) resolve(turns - from);
          else if (turns - from > maxTurns) reject(new Error(`not back after ${maxTurns} busy turns`));
          else return;
          clearInterval(check);
          checks.delete(check);
        }, 1);
        checks.add(check);
      }),
    stop: () => {
      clearInterval(timer);
      for (const check of checks) clearInterval(check);
    },
  };
}

/** The commands a client's bytes start (RESP arrays), named by their first word and, for CLIENT and CLUSTER, their second. */
function commandsIn(bytes: Buffer): string[] {
  const commands: string[] = [];
  for (const [, name, sub] of bytes.toString('latin1').matchAll(/\*\d+\r\n\$\d+\r\n([A-Za-z]+)\r\n(?:\$\d+\r\n([A-Za-z]+)\r\n)?/g)) {
    const upper = name!.toUpperCase();
    commands.push(upper === 'CLIENT' || upper === 'CLUSTER' ? `${upper} ${sub!.toUpperCase()}` : upper);
  }
  return commands;
}
