import { createLogger } from '@app/shared/platform/logger';
import { randomBytes } from 'node:crypto';
import { createMemoryTier, type MemoryTier } from '../src/cache/memory-tier.js';
import { createCacheClient, type Redis } from '../src/redis.js';

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
  for (let learnt = performance.now(); !tier.held(scope) && performance.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 1))) {
    if (performance.now() >= learnt) {
      tier.learn(scope, entry);
      learnt = performance.now() + 100;
    }
  }
  if (!tier.held(scope)) throw new Error(`entry ${n} was not held within 2 s of being learnt`);
  return scope;
}

it('counts the keys of what it holds: long keys fill it as surely as long bodies', async () => {
  const scopes = [];
  for (let n = 0; n < 100; n++) scopes.push(await hold(n, 8_000, Buffer.from('{}')));
  expect(tier.heldBytes).toBeLessThanOrEqual(MAX_BYTES);
  // 8,000-byte keys: a 256 KiB tier holds about 30 such entries, never all 100.
  const held = scopes.filter((scope) => tier.held(scope) !== undefined).length;
  expect(held).toBeGreaterThan(0);
  expect(held * 8_000).toBeLessThanOrEqual(MAX_BYTES);
  expect(tier.held(scopes.at(-1)!)).toBeDefined();
});

it('keeps each body in a buffer of its own: a slice does not keep its parent alive', async () => {
  const parent = Buffer.alloc(64 * 1024, 'x');
  const scope = await hold(1_000, 10, parent.subarray(0, 16));
  const held = tier.held(scope);
  expect(held).toBeDefined();
  const body = held!.body;
  expect(body.length).toBe(16);
  expect(body.buffer.byteLength).toBe(16);
});
