import { createLogger } from '@app/shared/platform/logger';
import { randomBytes } from 'node:crypto';
import { createMemoryTier, type MemoryTier } from '../../src/cache/memory-tier.js';
import { createCacheClient, type Redis } from '../../src/redis/client.js';

/** The tier's byte bound, against the test Redis (its own key prefix). */
const logger = createLogger('memory-tier-test', 'silent');
const keyPrefix = `tier-test-${randomBytes(4).toString('hex')}:`;
const MAX_BYTES = 256 * 1024;
let tier: MemoryTier;
let redis: Redis;

beforeAll(async () => {
  redis = createCacheClient(process.env.TEST_REDIS_URL!, logger, { keyPrefix });
  tier = createMemoryTier(process.env.TEST_REDIS_URL!, MAX_BYTES, logger, { keyPrefix });
  for (let attempt = 0; attempt < 250 && !tier.tracking; attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(tier.tracking).toBe(true);
});
afterAll(async () => {
  redis.disconnect();
  await tier.close();
});

/**
 * What the tier serves for `scope` once it has a lease (its first hit asks for one, a round trip to
 * Redis; a busy machine may let it lapse between two hits): undefined if it does not within 2 s.
 */
async function served(scope: { entryKey: string; generationKey: string; holdKey: string }) {
  const deadline = performance.now() + 2_000;
  let held = tier.held(scope);
  while (held === undefined && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 1));
    held = tier.held(scope);
  }
  return held;
}

/**
 * Learns an entry of `body` bytes under a key `keyLength` long, its generation current in Redis;
 * resolves once held, or throws. Held once the tier has read the generation and holds a lease (two
 * round trips to Redis). The invalidation of our own SET may reach the tier while it reads the
 * generation, and then it rightly installs nothing (it cannot tell the read was not older): learnt
 * again, as the next lookup would.
 */
async function hold(n: number, keyLength: number, body: Buffer) {
  const scope = { entryKey: `c:{items:${n}}:${'k'.repeat(keyLength)}`, generationKey: `g:{items:${n}}`, holdKey: `h:{items:${n}}` };
  await redis.set(scope.generationKey, 'g1', 'EX', 60);
  const entry = { generation: 'g1', storedAt: Date.now(), status: 200, headers: { 'content-type': 'application/json' }, body };
  const deadline = performance.now() + 2_000;
  let held = tier.held(scope);
  for (let learnt = performance.now(); held === undefined && performance.now() < deadline; held = tier.held(scope)) {
    if (performance.now() >= learnt) {
      tier.learn(scope, entry);
      learnt = performance.now() + 100;
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  if (held === undefined) throw new Error(`entry ${n} was not held within 2 s of being learnt`);
  return { scope, held };
}

it('counts the keys of what it holds: long keys fill it as surely as long bodies', async () => {
  const scopes = [];
  for (let n = 0; n < 40; n++) scopes.push((await hold(n, 8_000, Buffer.from('{}'))).scope);
  expect(tier.heldBytes).toBeLessThanOrEqual(MAX_BYTES);
  expect(await served(scopes.at(-1)!)).toBeDefined();
  // 8,000-byte keys: a 256 KiB tier keeps three quarters for entries, about 24 such, never all 40.
  const held = scopes.filter((scope) => tier.held(scope) !== undefined).length;
  expect(held).toBeGreaterThan(0);
  expect(held * 8_000).toBeLessThanOrEqual(MAX_BYTES);
});

it('keeps each body in a buffer of its own: a slice does not keep its parent alive', async () => {
  const parent = Buffer.alloc(64 * 1024, 'x');
  const { held } = await hold(1_000, 10, parent.subarray(0, 16));
  const body = held.body;
  expect(body.length).toBe(16);
  expect(body.buffer.byteLength).toBe(16);
});

/** Resolves with the first invalidation `of` hears whose keys satisfy `wanted`; fails after 2 s. */
function nextInvalidation(of: MemoryTier, wanted: (keys: readonly string[]) => boolean = () => true): Promise<readonly string[]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new Error('no invalidation within 2 s'));
    }, 2_000);
    const stop = of.onInvalidation((keys) => {
      if (!wanted(keys)) return;
      clearTimeout(timer);
      stop();
      resolve(keys);
    });
  });
}

it('forgets a scope once another client renews its generation or sets its hold, and hears of its own keys only', async () => {
  const { scope } = await hold(2_000, 10, Buffer.from('{}'));
  const other = createCacheClient(process.env.TEST_REDIS_URL!, logger);
  try {
    // The entry key, and a generation key outside the prefix, are not tracked: the first thing heard is the renewal.
    const heard = nextInvalidation(tier);
    await redis.set(scope.entryKey, 'x', 'EX', 60);
    await other.set(scope.generationKey, 'elsewhere', 'EX', 60);
    await redis.set(scope.generationKey, 'g2', 'EX', 60);
    expect(await heard).toEqual([scope.generationKey]);
    expect(tier.held(scope)).toBeUndefined();

    const { scope: again } = await hold(2_001, 10, Buffer.from('{}'));
    const heldHeard = nextInvalidation(tier, (keys) => keys.includes(again.holdKey));
    await redis.set(again.holdKey, '1', 'EX', 60);
    await heldHeard;
    expect(tier.held(again)).toBeUndefined();
  } finally {
    other.disconnect();
  }
});

it('has its barrier acknowledged by another tier on the same Redis', async () => {
  const url = process.env.TEST_REDIS_URL!;
  const second = createMemoryTier({ tracked: url, subscriber: url }, MAX_BYTES, logger, { keyPrefix });
  const listener = createCacheClient(url, logger);
  try {
    const deadline = performance.now() + 5_000;
    while (!second.tracking && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(second.tracking).toBe(true);
    // Every acknowledgement, as it goes to the tier that asked.
    const acks: string[] = [];
    listener.on('pmessage', (_pattern: string, channel: string) => acks.push(channel));
    while (listener.status !== 'ready' && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await listener.psubscribe(`${keyPrefix}gateway:barrier-ack:*`);
    await tier.barrier();
    // Both tiers (the asking one included) acknowledged it on the same channel, the asker's.
    for (let waited = performance.now() + 2_000; acks.length < 2 && performance.now() < waited; ) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(acks).toHaveLength(2);
    expect(acks[0]).toMatch(new RegExp(`^${keyPrefix}gateway:barrier-ack:[0-9a-f]{16}$`));
    expect(acks[1]).toBe(acks[0]);
  } finally {
    listener.disconnect();
    await second.close();
  }
});

it('refuses a tracked and a subscriber connection to different kinds of Redis', () => {
  const cluster = { nodes: [{ host: '127.0.0.1', port: 1 }] };
  const url = process.env.TEST_REDIS_URL!;
  expect(() => createMemoryTier({ tracked: cluster, subscriber: url }, MAX_BYTES, logger)).toThrow('both a cluster or both not');
  expect(() => createMemoryTier({ tracked: url, subscriber: cluster }, MAX_BYTES, logger)).toThrow('both a cluster or both not');
});

it('tracks the keys without a prefix when given none', async () => {
  const url = process.env.TEST_REDIS_URL!;
  const bare = createMemoryTier(url, MAX_BYTES, logger);
  const plain = createCacheClient(url, logger);
  try {
    const deadline = performance.now() + 2_000;
    while (!bare.tracking && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(bare.tracking).toBe(true);
    // A key of this file's own (random) tag, written with no prefix, as such a tier's gateway writes it.
    const key = `g:{${keyPrefix}bare}`;
    const heard = nextInvalidation(bare, (keys) => keys.includes(key));
    await plain.set(key, 'g1', 'EX', 60);
    await heard;
  } finally {
    plain.disconnect();
    await bare.close();
  }
});
