import { randomUUID } from 'node:crypto';
import { createLogger } from '@app/shared/platform/logger';
import { recordRevocation, revocationOf, RevocationFeed, RevocationList, REVOCATIONS_KEY } from '../../src/auth/revocations.js';
import { createCacheClient, type CacheClient } from '../../src/redis/client.js';
import { freePort } from '../fixtures.js';

/**
 * The revoked tokens: the list every request is checked against (in memory), the stream entries it
 * is learned from, and the feed that keeps a list in step with the test Redis (under a key prefix
 * of this file's own) and keeps refusing when Redis is unreachable.
 */
const logger = createLogger('revocations-test', 'silent');
const HOUR = 3_600_000;
const TOLERANCE = 30_000;
/** A gateway's token rules: tokens live an hour at most, with 30 s of clock tolerance. */
const CLOCK = { maxLifetimeMs: HOUR, clockToleranceMs: TOLERANCE };
/** How long a revocation outlives every token that was usable when it was made. */
const KEEP = HOUR + 2 * TOLERANCE;
const token = (subject: string, tokenId: string, issuedAt: number) => ({ subject, tokenId, issuedAt });

describe('RevocationList', () => {
  it('refuses nothing while it knows no revocation', () => {
    expect(new RevocationList(CLOCK).refuses(token('alice', 'a-1', 0))).toBe(false);
  });

  it('refuses a revoked token id, and no other token of the same subject', () => {
    const list = new RevocationList(CLOCK);
    list.add({ tokenId: 'a-1' }, 1_000);
    expect(list.refuses(token('alice', 'a-1', 500))).toBe(true);
    expect(list.refuses(token('alice', 'a-2', 500))).toBe(false);
  });

  it("refuses a subject's tokens issued up to when it was made and the clock tolerance, not later ones nor another subject's", () => {
    const list = new RevocationList(CLOCK);
    list.add({ subject: 'mallory' }, 10_000);
    expect(list.refuses(token('mallory', 'm-1', 9_000))).toBe(true);
    // Minted just before, by an issuer whose clock runs up to the tolerance ahead.
    expect(list.refuses(token('mallory', 'm-2', 10_000 + TOLERANCE))).toBe(true);
    expect(list.refuses(token('mallory', 'm-3', 10_001 + TOLERANCE))).toBe(false);
    expect(list.refuses(token('alice', 'a-1', 9_000))).toBe(false);
  });

  it('takes a time given for a subject up to when the revocation was made, never later', () => {
    const list = new RevocationList(CLOCK);
    list.add({ subject: 'mallory', issuedBefore: 5_000 }, 10_000);
    list.add({ subject: 'eve', issuedBefore: 10_000 + HOUR }, 10_000);
    expect(list.refuses(token('mallory', 'm-1', 5_000 + TOLERANCE))).toBe(true);
    expect(list.refuses(token('mallory', 'm-2', 5_001 + TOLERANCE))).toBe(false);
    expect(list.refuses(token('eve', 'e-1', 10_000 + TOLERANCE))).toBe(true);
    expect(list.refuses(token('eve', 'e-2', 10_001 + TOLERANCE))).toBe(false);
  });

  it('keeps the latest time when a subject is revoked twice, in either order', () => {
    const list = new RevocationList(CLOCK);
    list.add({ subject: 'mallory' }, 200_000);
    list.add({ subject: 'mallory' }, 100_000);
    expect(list.refuses(token('mallory', 'm-1', 150_000))).toBe(true);
    expect(list.refuses(token('mallory', 'm-2', 250_000))).toBe(false);
  });

  it('keeps a revocation past the longest life a token may have, until every token usable when it was made has expired', () => {
    let now = 0;
    const list = new RevocationList(CLOCK, () => now);
    list.add({ tokenId: 'a-1' }, 0);
    list.add({ subject: 'mallory' }, 0);
    // A token usable at 0 has exp ≤ an hour and the tolerance, and is accepted until the tolerance after.
    now = HOUR + 1_000;
    list.prune();
    expect(list.refuses(token('alice', 'a-1', 0))).toBe(true);
    expect(list.refuses(token('mallory', 'm-1', 0))).toBe(true);
    now = KEEP - 1;
    list.prune();
    expect(list.size).toBe(2);
    now = KEEP;
    list.prune();
    expect(list.size).toBe(0);
    expect(list.refuses(token('mallory', 'a-1', 0))).toBe(false);
  });

  it("keeps a token id's revocation until the token's exp (and the tolerance) when it knows a later one", () => {
    let now = 0;
    const list = new RevocationList(CLOCK, () => now);
    const expiresAt = 10 * 365 * 24 * HOUR;
    list.add({ tokenId: 'future-dated', expiresAt }, 0);
    list.add({ tokenId: 'short', expiresAt: 60_000 }, 0);
    now = expiresAt + TOLERANCE - 1;
    list.prune();
    expect(list.refuses(token('alice', 'future-dated', expiresAt - HOUR))).toBe(true);
    expect(list.refuses(token('alice', 'short', 0))).toBe(false);
    now = expiresAt + TOLERANCE;
    list.prune();
    expect(list.size).toBe(0);
  });

  it('keeps a token id revoked again later for the later span', () => {
    let now = 0;
    const list = new RevocationList(CLOCK, () => now);
    list.add({ tokenId: 'a-1' }, 5_000);
    list.add({ tokenId: 'a-1' }, 0);
    now = KEEP + 1_000;
    list.prune();
    expect(list.refuses(token('alice', 'a-1', 0))).toBe(true);
  });
});

describe('revocationOf (a stream entry)', () => {
  it.each([
    [['jti', 'a-1'], { tokenId: 'a-1' }],
    [['jti', 'a-1', 'exp', '1700000000000'], { tokenId: 'a-1', expiresAt: 1_700_000_000_000 }],
    [['sub', 'mallory', 'before', '1700000000000'], { subject: 'mallory', issuedBefore: 1_700_000_000_000 }],
    [['sub', 'mallory'], { subject: 'mallory' }],
    // A time it cannot read widens the revocation: the usual span, up to when it was made.
    [['jti', 'a-1', 'exp', 'later'], { tokenId: 'a-1' }],
    [['sub', 'mallory', 'before', 'soon'], { subject: 'mallory' }],
    [['sub', 'mallory', 'before', ''], { subject: 'mallory' }],
    [['jti', ''], undefined],
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
    const feed = new RevocationFeed(client, new RevocationList(CLOCK), { pollMs, logger });
    feeds.push(feed);
    return feed;
  };

  it('reads on start what was recorded before, and later what is recorded after', async () => {
    await recordRevocation(redis, { tokenId: 'before-start' }, CLOCK);
    const feed = feedOf(redis);
    await feed.start();
    expect(feed.list.refuses(token('alice', 'before-start', 0))).toBe(true);
    await recordRevocation(redis, { subject: 'mallory', issuedBefore: 5_000 }, CLOCK);
    expect(feed.list.refuses(token('mallory', 'm-1', 4_000))).toBe(false);
    await feed.caughtUp();
    expect(feed.list.refuses(token('mallory', 'm-1', 4_000))).toBe(true);
  });

  it('learns a revocation by itself, at its poll interval', async () => {
    const feed = feedOf(redis, 20);
    await feed.start();
    const tokenId = randomUUID();
    await recordRevocation(redis, { tokenId }, CLOCK);
    const learned = await new Promise<boolean>((resolve) => {
      const check = setInterval(() => {
        if (!feed.list.refuses(token('alice', tokenId, 0))) return;
        clearInterval(check);
        resolve(true);
      }, 5);
    });
    expect(learned).toBe(true);
  });

  it('trims the stream by Redis time to what may still name a live token, keeping a token id whose exp is later', async () => {
    const trimmed = await connected(createCacheClient(process.env.TEST_REDIS_URL!, logger, { keyPrefix: `revocations-test:${randomUUID()}:` }));
    try {
      // Entries made longer ago than a revocation is usually kept, and one a little less long ago.
      const [seconds] = await trimmed.time();
      const longAgo = Number(seconds) * 1000 - KEEP - 60_000;
      const farAhead = longAgo + 10 * 365 * 24 * HOUR;
      for (let i = 0; i < 300; i++) await trimmed.xadd(REVOCATIONS_KEY, `${longAgo}-${i}`, 'jti', `old-${i}`);
      await trimmed.xadd(REVOCATIONS_KEY, `${longAgo}-300`, 'sub', 'old-subject');
      await trimmed.xadd(REVOCATIONS_KEY, `${longAgo}-301`, 'jti', 'future-dated', 'exp', String(farAhead));
      await trimmed.xadd(REVOCATIONS_KEY, `${longAgo + 120_000}-0`, 'jti', 'recent');
      await recordRevocation(trimmed, { tokenId: 'new' }, CLOCK);
      const left = ((await trimmed.xrange(REVOCATIONS_KEY, '-', '+')) as [string, string[]][]).map(([, fields]) => fields);
      expect(left).toEqual([['jti', 'recent'], ['jti', 'new'], ['jti', 'future-dated', 'exp', String(farAhead)]]);
      // A replica started now learns it, and keeps it until the token's exp.
      const feed = new RevocationFeed(trimmed, new RevocationList(CLOCK), { pollMs: 60_000, logger });
      feeds.push(feed);
      await feed.start();
      expect(feed.list.refuses(token('alice', 'future-dated', farAhead - HOUR))).toBe(true);
    } finally {
      await trimmed.del(REVOCATIONS_KEY);
      trimmed.disconnect();
    }
  });

  it('keeps refusing what it knew while Redis is unreachable, and says so once', async () => {
    const warnings: string[] = [];
    const unreachable = createCacheClient(`redis://127.0.0.1:${await freePort()}`, logger);
    try {
      const list = new RevocationList(CLOCK);
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
