import type { Logger } from '@app/shared/platform/logger';
import type { CacheClient } from '../redis/client.js';

/**
 * One token by its `jti` (and, when known, its `exp`, ms), or every token of a subject issued
 * before a time: `issuedBefore` (ms) when given, never later than when the revocation was made.
 */
export type Revocation = { tokenId: string; expiresAt?: number } | { subject: string; issuedBefore?: number };

/** What a revocation is checked against: the parts of a verified token it can name. */
export interface RevocableToken {
  subject: string;
  tokenId: string;
  /** `iat`, in ms since the epoch. */
  issuedAt: number;
}

/** The gateway's token rules a revocation's reach and keep follow from (tokens.ts, TokenRules), in ms. */
export interface TokenClock {
  maxLifetimeMs: number;
  clockToleranceMs: number;
}

/** The gateway's configuration, as the revocations need it. */
export const tokenClockOf = (config: { AUTH_MAX_TOKEN_LIFETIME_SECONDS: number; AUTH_CLOCK_TOLERANCE_SECONDS: number }): TokenClock => ({
  maxLifetimeMs: config.AUTH_MAX_TOKEN_LIFETIME_SECONDS * 1000,
  clockToleranceMs: config.AUTH_CLOCK_TOLERANCE_SECONDS * 1000,
});

/** How long a revocation outlives every token that was usable when it was made (keptUntil). */
const usualKeepMs = (clock: TokenClock): number => clock.maxLifetimeMs + 2 * clock.clockToleranceMs;

/**
 * Until when a revocation made at `madeAt` (Redis's clock, ms) must be kept. A token the gateway
 * accepts at T has `exp` ≤ T + the longest lifetime + the tolerance (its `iat` is at most the
 * tolerance ahead), and is accepted until `exp` + the tolerance: a revocation kept that long after
 * it was made outlives every token it names that was usable then. A token by `jti` that was not yet
 * usable then (dated in the future) is outlived only when the revocation knows its `exp`.
 */
function keptUntil(revocation: Revocation, madeAt: number, clock: TokenClock): number {
  const everyUsableToken = madeAt + usualKeepMs(clock);
  if ('tokenId' in revocation && revocation.expiresAt !== undefined) return Math.max(everyUsableToken, revocation.expiresAt + clock.clockToleranceMs);
  return everyUsableToken;
}

/**
 * The latest `iat` (ms) a subject's revocation made at `madeAt` refuses: `issuedBefore`, never later
 * than `madeAt`, and the clock tolerance, since an issuer whose clock runs that far ahead stamps a
 * token it minted just before with an `iat` that much later.
 */
const latestRefusedIssue = (issuedBefore: number | undefined, madeAt: number, clock: TokenClock): number =>
  Math.min(issuedBefore ?? madeAt, madeAt) + clock.clockToleranceMs;

/**
 * The revocations a gateway knows, in memory: every request's token is checked here, cache hits
 * included, with no round trip. Each is kept until every token it names has expired (keptUntil).
 */
export class RevocationList {
  readonly #tokens = new Map<string, number>();
  readonly #subjects = new Map<string, { refusedUpTo: number; forgetAt: number }>();

  constructor(
    private readonly clock: TokenClock,
    private readonly now: () => number = Date.now,
  ) {}

  /** Learns a revocation made at `madeAt` (ms, Redis's clock); one already known changes nothing. */
  add(revocation: Revocation, madeAt: number): void {
    const forgetAt = keptUntil(revocation, madeAt, this.clock);
    if ('tokenId' in revocation) {
      this.#tokens.set(revocation.tokenId, Math.max(forgetAt, this.#tokens.get(revocation.tokenId) ?? 0));
      return;
    }
    const known = this.#subjects.get(revocation.subject);
    this.#subjects.set(revocation.subject, {
      refusedUpTo: Math.max(latestRefusedIssue(revocation.issuedBefore, madeAt, this.clock), known?.refusedUpTo ?? 0),
      forgetAt: Math.max(forgetAt, known?.forgetAt ?? 0),
    });
  }

  /** Whether a revocation names this token. With none known (the usual case) this is two size checks. */
  refuses(token: RevocableToken): boolean {
    if (this.#tokens.size === 0 && this.#subjects.size === 0) return false;
    if (this.#tokens.has(token.tokenId)) return true;
    const subject = this.#subjects.get(token.subject);
    return subject !== undefined && token.issuedAt <= subject.refusedUpTo;
  }

  /** Forgets the revocations whose tokens have all expired. */
  prune(): void {
    const now = this.now();
    for (const [tokenId, forgetAt] of this.#tokens) if (forgetAt <= now) this.#tokens.delete(tokenId);
    for (const [subject, { forgetAt }] of this.#subjects) if (forgetAt <= now) this.#subjects.delete(subject);
  }

  get size(): number {
    return this.#tokens.size + this.#subjects.size;
  }
}

/** The Redis stream every gateway replica reads revocations from (REDIS_KEY_PREFIX goes in front). */
export const REVOCATIONS_KEY = 'revocations';

type StreamEntry = [id: string, fields: string[]];

/** A number a stream entry holds, or undefined when it holds none (or not one). */
function numberIn(value: string | undefined): number | undefined {
  const number = value === undefined || value === '' ? Number.NaN : Number(value);
  return Number.isSafeInteger(number) ? number : undefined;
}

/**
 * A stream entry's revocation, or undefined for an entry this gateway cannot read. A time it cannot
 * read is left out, which widens the revocation (kept for the usual span, up to when it was made).
 */
export function revocationOf(fields: readonly string[]): Revocation | undefined {
  const values = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) values.set(fields[i] ?? '', fields[i + 1] ?? '');
  const tokenId = values.get('jti');
  if (tokenId !== undefined && tokenId !== '') {
    const expiresAt = numberIn(values.get('exp'));
    return expiresAt === undefined ? { tokenId } : { tokenId, expiresAt };
  }
  const subject = values.get('sub');
  if (subject === undefined || subject === '') return undefined;
  const issuedBefore = numberIn(values.get('before'));
  return issuedBefore === undefined ? { subject } : { subject, issuedBefore };
}

function fieldsOf(revocation: Revocation): string[] {
  if ('tokenId' in revocation) return ['jti', revocation.tokenId, ...(revocation.expiresAt === undefined ? [] : ['exp', String(revocation.expiresAt)])];
  return ['sub', revocation.subject, ...(revocation.issuedBefore === undefined ? [] : ['before', String(revocation.issuedBefore)])];
}

/** An entry id's time: Redis's clock (ms) when it was added, the same for every replica. */
const timeOf = (id: string): number => Number(id.slice(0, id.indexOf('-')));

/**
 * Records a revocation in the stream and trims it; resolves with when the revocation was made, by
 * Redis's clock (its entry's id), which every replica judges it by. Rejects when Redis does not take
 * it: the caller says so, since no replica would learn it.
 */
export async function recordRevocation(redis: CacheClient, revocation: Revocation, clock: TokenClock): Promise<number> {
  const id = await redis.xadd(REVOCATIONS_KEY, '*', ...fieldsOf(revocation));
  if (id === null) throw new Error('Redis did not record the revocation');
  const madeAt = timeOf(id);
  // The revocation is recorded either way: a trim that fails is done by the next one.
  await trimRevocations(redis, madeAt, clock).catch(() => undefined);
  return madeAt;
}

const PAGE = 1000;

/**
 * Drops the entries made longer ago than a revocation is usually kept (by entry time, which is
 * Redis's clock), after copying to the stream's end the few of them that must be kept longer (a
 * token's `exp` far ahead, keptUntil): every replica learns the copy, and no entry goes early.
 */
async function trimRevocations(redis: CacheClient, now: number, clock: TokenClock): Promise<void> {
  const trimBefore = now - usualKeepMs(clock);
  let from = '-';
  let entries: StreamEntry[];
  do {
    entries = (await redis.xrange(REVOCATIONS_KEY, from, `(${trimBefore}-0`, 'COUNT', PAGE)) as StreamEntry[];
    for (const [id, fields] of entries) {
      const revocation = revocationOf(fields);
      if (revocation && keptUntil(revocation, timeOf(id), clock) > now) await redis.xadd(REVOCATIONS_KEY, '*', ...fields);
    }
    from = `(${entries.at(-1)?.[0] ?? ''}`;
  } while (entries.length === PAGE);
  await redis.xtrim(REVOCATIONS_KEY, 'MINID', `${trimBefore}-0`);
}

/**
 * Keeps a RevocationList in step with the stream: reads all of it on start, then what was added
 * since, every `pollMs`. A stream rather than a channel, so a replica that was cut off from Redis
 * (or started later) learns what was said meanwhile; while Redis is unreachable it keeps refusing
 * what it knew.
 */
export class RevocationFeed {
  #lastId = '0-0';
  #timer: NodeJS.Timeout | undefined;
  #reading: Promise<void> | undefined;
  /** Whether the last read failed: an outage is logged once, not every poll. */
  #failing = false;

  constructor(
    private readonly redis: CacheClient,
    readonly list: RevocationList,
    private readonly options: { pollMs: number; logger: Logger },
  ) {}

  /**
   * Reads what the stream holds, then follows it, and reads at once whenever the connection comes
   * back. Resolves after the first read, even a failed one: a Redis that is not there within
   * `connectWithinMs` does not keep the gateway from serving.
   */
  async start(connectWithinMs = 2_000): Promise<void> {
    this.redis.on('ready', this.#onReady);
    this.#timer = setInterval(() => void this.poll(), this.options.pollMs);
    this.#timer.unref();
    await untilReady(this.redis, connectWithinMs);
    await this.poll();
  }

  readonly #onReady = () => void this.poll();

  /** Reads the entries added since the last read; one read at a time. */
  poll(): Promise<void> {
    this.#reading ??= this.#read().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  /** Reads what was added until now: a read under way may have begun before the last addition. */
  async caughtUp(): Promise<void> {
    await this.#reading;
    await this.poll();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.redis.off('ready', this.#onReady);
  }

  async #read(): Promise<void> {
    try {
      let entries: StreamEntry[];
      do {
        entries = (await this.redis.xrange(REVOCATIONS_KEY, `(${this.#lastId}`, '+', 'COUNT', PAGE)) as StreamEntry[];
        for (const [id, fields] of entries) this.#learn(id, fields);
      } while (entries.length === PAGE);
      this.list.prune();
      if (this.#failing) this.options.logger.info('Reading the revocations from Redis again');
      this.#failing = false;
    } catch (error) {
      if (!this.#failing) this.options.logger.warn({ err: error }, 'Could not read the revocations from Redis; the ones known are still refused');
      this.#failing = true;
    }
  }

  #learn(id: string, fields: string[]): void {
    this.#lastId = id;
    const revocation = revocationOf(fields);
    if (revocation) this.list.add(revocation, timeOf(id));
    else this.options.logger.warn({ id }, 'A revocation in Redis is malformed; it is ignored');
  }
}

/** Resolves once `redis` is connected, or after `withinMs`, whichever comes first. */
function untilReady(redis: CacheClient, withinMs: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, withinMs);
    redis.once('ready', done);
  });
}
