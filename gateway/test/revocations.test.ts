import { randomUUID } from 'node:crypto';
import { createLogger } from '@app/shared/platform/logger';
import { recordRevocation, revocationOf, RevocationFeed, RevocationList, REVOCATIONS_KEY } from '../src/auth/revocations.js';
import { createCacheClient, type CacheClient } from '../src/redis.js';
import { freePort } from './fixtures.js';

/**
 * The revoked tokens: the list every request is checked against (in memory), the stream entries it
 * is learned from, and the feed that keeps a list in step with the test Redis (under a key prefix
 * of this file's own) and keeps refusing when Redis is unreachable.
 */
const logger = createLogger('revocations-test', 'silent');
const HOUR = 3_600_000;
const token = (subject: string, tokenId: string | undefined, issuedAt: number) => ({ subject, tokenId, issuedAt });

describe('RevocationList', () => {
  it('refuses nothing while it knows no revocation', () => {
    expect(new RevocationList(HOUR).refuses(token('alice', 'a-1', 0))).toBe(false);
  });

  it('refuses a revoked token id, and no other token of the same subject', () => {
    const list = new RevocationList(HOUR);
    list.add({ tokenId: 'a-1' }, 1_000);
    expect(list.refuses(token('alice', 'a-1', 500))).toBe(true);
    expect(list.refuses(token('alice', 'a-2', 500))).toBe(false);
    expect(list.refuses(token('alice', undefined, 500))).toBe(false);
  });

  it("refuses a subject's tokens issued at or before the time, not later ones nor another subject's", () => {
    const list = new RevocationList(HOUR);
    list.add({ subject: 'mallory', issuedBefore: 10_000 }, 10_000);
    expect(list.refuses(token('mallory', 'm-1', 9_000))).toBe(true);
    expect(list.refuses(token('mallory', 'm-2', 10_000))).toBe(true);
    expect(list.refuses(token('mallory', 'm-3', 11_000))).toBe(false);
    expect(list.refuses(token('alice', 'a-1', 9_000))).toBe(false);
  });

  it('keeps the latest time when a subject is revoked twice, in either order', () => {
    const list = new RevocationList(HOUR);
    list.add({ subject: 'mallory', issuedBefore: 20_000 }, 20_000);
    list.add({ subject: 'mallory', issuedBefore: 10_000 }, 10_000);
    expect(list.refuses(token('mallory', undefined, 15_000))).toBe(true);
    expect(list.refuses(token('mallory', undefined, 25_000))).toBe(false);
  });

  it('forgets a revocation once every token it names has expired, not before', () => {
    let now = 0;
    const list = new RevocationList(HOUR, () => now);
    list.add({ tokenId: 'a-1' }, 0);
    list.add({ subject: 'mallory', issuedBefore: 0 }, 0);
    now = HOUR - 1;
    list.prune();
    expect(list.size).toBe(2);
    now = HOUR;
    list.prune();
    expect(list.size).toBe(0);
    expect(list.refuses(token('mallory', 'a-1', 0))).toBe(false);
  });

  it('keeps a token id revoked again later for the later span', () => {
    let now = 0;
    const list = new RevocationList(HOUR, () => now);
    list.add({ tokenId: 'a-1' }, 5_000);
    list.add({ tokenId: 'a-1' }, 0);
    now = HOUR + 1_000;
    list.prune();
    expect(list.refuses(token('alice', 'a-1', 0))).toBe(true);
  });
});

describe('revocationOf (a stream entry)', () => {
  it.each([
    [['jti', 'a-1'], { tokenId: 'a-1' }],
    [['sub', 'mallory', 'before', '1700000000000'], { subject: 'mallory', issuedBefore: 1_700_000_000_000 }],
    [['jti', ''], undefined],
    [['sub', 'mallory'], undefined],
    [['sub', 'mallory', 'before', 'soon'], undefined],
    [['sub', '', 'before', '1'], undefined],
    [['other', 'x'], undefined],
    [['jti'], undefined],
  ])('%j → %j', (fields, revocation) => {
    expect(revocationOf(fields)).toEqual(revocation);
  });
});

describe('RevocationFeed, with the test Redis', () => {
  let redis: CacheClient;
  const feeds: RevocationFeed[] = [];
  const connected = async (client: CacheClient) => {
    if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
    return client;
  };
  beforeAll(async () => {
    redis = await connected(createCacheClient(process.env.TEST_REDIS_URL!, logger, { keyPrefix: `revocations-test:${randomUUID()}:` }));
  });
  afterAll(async () => {
    for (const feed of feeds) feed.stop();
    await redis.del(REVOCATIONS_KEY);
    redis.disconnect();
  });
  const feedOf = (client: CacheClient, pollMs = 60_000) => {
    const feed = new RevocationFeed(client, new RevocationList(HOUR), { pollMs, logger });
    feeds.push(feed);
    return feed;
  };

  it('reads on start what was recorded before, and later what is recorded after', async () => {
    await recordRevocation(redis, { tokenId: 'before-start' }, HOUR);
    const feed = feedOf(redis);
    await feed.start();
    expect(feed.list.refuses(token('alice', 'before-start', 0))).toBe(true);
    await recordRevocation(redis, { subject: 'mallory', issuedBefore: 5_000 }, HOUR);
    expect(feed.list.refuses(token('mallory', undefined, 4_000))).toBe(false);
    await feed.caughtUp();
    expect(feed.list.refuses(token('mallory', undefined, 4_000))).toBe(true);
  });

  it('learns a revocation by itself, at its poll interval', async () => {
    const feed = feedOf(redis, 20);
    await feed.start();
    const tokenId = randomUUID();
    await recordRevocation(redis, { tokenId }, HOUR);
    const learned = await new Promise<boolean>((resolve) => {
      const check = setInterval(() => {
        if (!feed.list.refuses(token('alice', tokenId, 0))) return;
        clearInterval(check);
        resolve(true);
      }, 5);
    });
    expect(learned).toBe(true);
  });

  it('trims the stream to what may still name a live token', async () => {
    const trimmed = await connected(createCacheClient(process.env.TEST_REDIS_URL!, logger, { keyPrefix: `revocations-test:${randomUUID()}:` }));
    try {
      // Far beyond the exact-trim threshold, so that `~` trims whole nodes of the stream.
      for (let i = 0; i < 300; i++) await recordRevocation(trimmed, { tokenId: `old-${i}` }, HOUR, Date.now() - 2 * HOUR);
      await recordRevocation(trimmed, { tokenId: 'new' }, 1, Date.now() + 1_000);
      expect(await trimmed.xlen(REVOCATIONS_KEY)).toBeLessThan(301);
    } finally {
      await trimmed.del(REVOCATIONS_KEY);
      trimmed.disconnect();
    }
  });

  it('keeps refusing what it knew while Redis is unreachable, and says so once', async () => {
    const warnings: string[] = [];
    const unreachable = createCacheClient(`redis://127.0.0.1:${await freePort()}`, logger);
    try {
      const list = new RevocationList(HOUR);
      list.add({ tokenId: 'known' }, Date.now());
      const feed = new RevocationFeed(unreachable, list, { pollMs: 60_000, logger: { ...logger, warn: (_: unknown, message: string) => warnings.push(message), info: () => undefined } as never });
      await feed.start(50);
      await feed.poll();
      feed.stop();
      expect(list.refuses(token('alice', 'known', 0))).toBe(true);
      expect(warnings).toEqual(['Could not read the revocations from Redis; the ones known are still refused']);
    } finally {
      unreachable.disconnect();
    }
  });
});
