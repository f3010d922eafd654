import type { Logger } from '@app/shared/platform/logger';
import type { CacheClient } from '../redis.js';

/** One token by its `jti`, or every token of a subject issued at or before a time. */
export type Revocation = { tokenId: string } | { subject: string; issuedBefore: number };

/** What a revocation is checked against: the parts of a verified token it can name. */
export interface RevocableToken {
  subject: string;
  tokenId: string | undefined;
  /** `iat`, in ms since the epoch. */
  issuedAt: number;
}

/**
 * The revocations a gateway knows, in memory: every request's token is checked here, cache hits
 * included, with no round trip. A revocation is kept for the longest life a token may have
 * (AUTH_MAX_TOKEN_LIFETIME_SECONDS) after it was made: by then every token it names has expired.
 */
export class RevocationList {
  readonly #tokens = new Map<string, number>();
  readonly #subjects = new Map<string, { issuedBefore: number; forgetAt: number }>();

  constructor(
    private readonly keepForMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Learns a revocation made at `madeAt` (ms); one already known changes nothing. */
  add(revocation: Revocation, madeAt: number): void {
    const forgetAt = madeAt + this.keepForMs;
    if ('tokenId' in revocation) {
      this.#tokens.set(revocation.tokenId, Math.max(forgetAt, this.#tokens.get(revocation.tokenId) ?? 0));
      return;
    }
    const known = this.#subjects.get(revocation.subject);
    this.#subjects.set(revocation.subject, {
      issuedBefore: Math.max(revocation.issuedBefore, known?.issuedBefore ?? 0),
      forgetAt: Math.max(forgetAt, known?.forgetAt ?? 0),
    });
  }

  /** Whether a revocation names this token. With none known (the usual case) this is two size checks. */
  refuses(token: RevocableToken): boolean {
    if (this.#tokens.size === 0 && this.#subjects.size === 0) return false;
    if (token.tokenId !== undefined && this.#tokens.has(token.tokenId)) return true;
    const subject = this.#subjects.get(token.subject);
    return subject !== undefined && token.issuedAt <= subject.issuedBefore;
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

/** A stream entry's revocation, or undefined for an entry this gateway cannot read. */
export function revocationOf(fields: readonly string[]): Revocation | undefined {
  const values = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) values.set(fields[i] ?? '', fields[i + 1] ?? '');
  const tokenId = values.get('jti');
  if (tokenId !== undefined && tokenId !== '') return { tokenId };
  const subject = values.get('sub');
  const issuedBefore = Number(values.get('before'));
  if (subject !== undefined && subject !== '' && Number.isSafeInteger(issuedBefore)) return { subject, issuedBefore };
  return undefined;
}

const fieldsOf = (revocation: Revocation): string[] =>
  'tokenId' in revocation ? ['jti', revocation.tokenId] : ['sub', revocation.subject, 'before', String(revocation.issuedBefore)];

/** An entry id's time: Redis's clock (ms) when it was added, the same for every replica. */
const timeOf = (id: string): number => Number(id.slice(0, id.indexOf('-')));

/**
 * Records a revocation in the stream, trimmed to what may still name a live token. Rejects when
 * Redis does not take it: the caller says so, since no replica would learn it.
 */
export async function recordRevocation(redis: CacheClient, revocation: Revocation, keepForMs: number, now = Date.now()): Promise<string> {
  const id = await redis.xadd(REVOCATIONS_KEY, 'MINID', '~', String(now - keepForMs), '*', ...fieldsOf(revocation));
  if (id === null) throw new Error('Redis did not record the revocation');
  return id;
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
        entries = (await this.redis.xrange(REVOCATIONS_KEY, `(${this.#lastId}`, '+', 'COUNT', 1000)) as StreamEntry[];
        for (const [id, fields] of entries) this.#learn(id, fields);
      } while (entries.length === 1000);
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
