import { randomBytes } from 'node:crypto';
import type { Logger } from '@app/shared/platform/logger';
import { LRUCache } from 'lru-cache';
import { createCacheClient, createSubscriberClient, type Redis } from '../redis.js';
import { CONTENT_CODINGS } from './compression.js';
import { headerList, type CachedResponse, type Representation, type Variants } from './entry.js';
import { generationKeyOfHold, type ReadScope, type WriteScope } from './scope.js';

/** The channel Redis publishes invalidations on for a client tracking keys in RESP2 redirect mode. */
const INVALIDATIONS = '__redis__:invalidate';

/** The share of the tier's bytes its generations may take; a forgotten generation is a trip to Redis. */
const GENERATIONS_SHARE = 0.25;

/**
 * The subscriber is pinged this often; a ping unanswered for HEARTBEAT_TIMEOUT_MS means its
 * connection is gone even if TCP has not said so (a silent network loss): it is dropped and opened
 * again, and so is everything in memory. This bounds how long invalidations can go missing unnoticed.
 */
export const HEARTBEAT_MS = 500;
export const HEARTBEAT_TIMEOUT_MS = 1_500;

/**
 * How long an answered ping on the subscriber lets the tier serve from memory: what a ping sent then
 * brought back, it has, every invalidation Redis sent before that ping. Renewed in the background
 * by the hits of a busy tier; an idle one lets it lapse (its first hit then asks Redis).
 */
const LEASE_MS = 200;
/** A write's barrier waits at most this long for every tier's acknowledgement: beyond the lease. */
const BARRIER_WAIT_MS = LEASE_MS + 50;

/**
 * What an entry or a generation costs besides the bytes of its strings and body: the objects,
 * the body's own ArrayBuffer, the map slot and lru-cache's bookkeeping arrays.
 */
const ENTRY_OVERHEAD_BYTES = 512;
const GENERATION_OVERHEAD_BYTES = 160;

/** An entry held here: with its header list made once, and its own copy of its scope's generation key (see `held`). */
interface HeldEntry extends CachedResponse {
  headerList: readonly string[];
  generationKey: string;
}

/** The reads of one scope's hold and generation under way, and how many invalidations of the scope came meanwhile. */
interface ScopeWatch {
  reads: number;
  invalidations: number;
}

/** A read of a scope's hold and generation, sent while the tier tracked (see `watch`). */
export interface ScopeRead {
  readonly generationKey: string;
  readonly session: number;
  /** The scope's invalidations counted when the read was sent: any more when it ends spoil it. */
  readonly invalidations: number;
  readonly watch: ScopeWatch;
}

/**
 * Hot cache entries in this gateway's memory, in front of Redis, exactly as correct as Redis itself:
 * an entry is served only while its generation is known to be the current one and its scope known
 * not to be held (scope.ts), and both are known only through Redis server-assisted client-side
 * caching in broadcasting mode: a dedicated connection turns on
 * `CLIENT TRACKING on REDIRECT <id> BCAST PREFIX g:{ PREFIX h:{` (RESP2), the id being a second
 * connection SUBSCRIBEd to `__redis__:invalidate`, so every change of a generation or hold key (a
 * write through any replica renews a generation, and may set a hold) makes Redis tell every replica
 * to forget what it knew of that scope. Broadcasting rather than tracking the keys each connection
 * reads: a scope's hold and generation may then be learnt from a read on any connection, so the
 * cache's own lookup (one MGET of hold, generation and entry) installs what it finds without a second
 * round trip on a tracked connection, which costs a whole event-loop turn under load.
 *
 * The race: the reply to a read and an invalidation of the same key arrive on two connections, in
 * no guaranteed order. So a generation is installed only when the read was sent after tracking was
 * on (in the same session: no connection lost or re-tracked since; tracking is on once Redis has
 * answered CLIENT TRACKING, so Redis serves any read sent later with tracking on) and no invalidation
 * of either key arrived between sending the read and installing the result (`watch`). Redis
 * broadcasts every later change, which then removes it.
 *
 * Read-your-writes across replicas, however late an invalidation travels (a relay between a
 * replica and Redis): before a write's response leaves, the writer publishes a barrier on Redis,
 * which reaches every tier's subscriber behind the invalidations queued before it; each tier
 * acknowledges it once it has applied them (`barrier`). A tier that does not acknowledge in time has
 * let its lease lapse (`held`): it serves from memory only while a ping answered on its subscriber
 * was sent within LEASE_MS, so it has every invalidation sent before the write's barrier waited out.
 *
 * When either connection is lost, everything in memory is dropped and hits go back to Redis round
 * trips until both are back and tracking is on again: invalidations sent meanwhile may be lost, so
 * nothing learnt before is trusted. A Redis flush (an invalidation without keys) drops everything too.
 *
 * lru-cache bounds the entries by bytes (maxSize), least recently used first.
 */
export class MemoryTier {
  readonly #entries: LRUCache<string, HeldEntry>;
  /** The current generation of each scope (by generation key) known to be current and not held. */
  readonly #generations: LRUCache<string, string>;
  /** By generation key, while reads of the scope are under way. */
  readonly #watches = new Map<string, ScopeWatch>();
  /** This tier's own generation reads under way (`learn`), one per scope, by generation key. */
  readonly #reads = new Map<string, Promise<void>>();
  /** Bumped whenever what was learnt can no longer be trusted (a connection lost, a flush). */
  #session = 0;
  #tracking = false;
  /** The subscriber's client id once it listens to invalidations on its current connection. */
  #redirectTo: number | undefined;
  #subscriberConnection = 0;
  readonly #invalidationListeners: ((keys: readonly string[]) => void)[] = [];
  /** When the unanswered ping was sent (performance.now()), if one is. */
  #pingSentAt: number | undefined;
  /** When the last ping answered on the subscriber in this session was sent (performance.now()): the lease (`held`). */
  #leaseFrom: number | undefined;
  #leasing = false;
  /** This tier's barriers (`barrier`) waiting for acknowledgements, by nonce. */
  readonly #barriers = new Map<string, { acks: number; expected: number; done: () => void }>();
  #nonce = 0;
  /** Where every tier hears of barriers, and where this one hears its barriers acknowledged. */
  readonly #barrierChannel: string;
  readonly #ackChannel: string;
  readonly #heartbeat: NodeJS.Timeout;

  constructor(
    private readonly tracked: Redis,
    private readonly subscriber: Redis,
    readonly maxBytes: number,
    private readonly logger: Logger,
  ) {
    // Counted by what each holds, keys included: a flood of distinct keys (query strings, ids) can
    // fill the tier, never grow it past its bytes.
    const generationBytes = Math.max(1, Math.floor(maxBytes * GENERATIONS_SHARE));
    this.#entries = new LRUCache<string, HeldEntry>({
      maxSize: Math.max(1, maxBytes - generationBytes),
      sizeCalculation: (entry, key) => entrySize(key, entry),
    });
    this.#generations = new LRUCache<string, string>({
      maxSize: generationBytes,
      sizeCalculation: (generation, key) => GENERATION_OVERHEAD_BYTES + stringBytes(key) + stringBytes(generation),
    });
    const prefix = tracked.options.keyPrefix ?? '';
    this.#barrierChannel = `${prefix}gateway:barrier`;
    this.#ackChannel = `${prefix}gateway:barrier-ack:${randomBytes(8).toString('hex')}`;
    subscriber.on('messageBuffer', (channel: Buffer, message: Buffer | Buffer[] | null) => {
      const name = channel.toString();
      if (name === INVALIDATIONS) this.#invalidated(message as Buffer[] | null);
      else if (name === this.#barrierChannel) this.#acknowledge(String(message));
      else if (name === this.#ackChannel) this.#acknowledged(String(message));
    });
    subscriber.on('ready', () => void this.#listen());
    subscriber.on('close', () => {
      this.#subscriberConnection += 1;
      this.#pingSentAt = undefined;
      this.#redirectTo = undefined;
      this.#reset('the invalidation subscriber lost its connection');
    });
    tracked.on('ready', () => void this.#track());
    tracked.on('close', () => this.#reset('the tracking connection was lost'));
    if (subscriber.status === 'ready') void this.#listen();
    this.#heartbeat = setInterval(() => this.#beat(), HEARTBEAT_MS).unref();
  }

  /** Both connections are up and Redis tracks what this tier reads: it may serve and learn. */
  get tracking(): boolean {
    return this.#tracking;
  }

  /** Bytes of entries and generations held now. */
  get heldBytes(): number {
    return this.#entries.calculatedSize + this.#generations.calculatedSize;
  }

  /**
   * The entry for `scope`, if held and its generation is still the current one. No I/O. Its
   * generation is looked up by the entry's own generation key, hashed once, rather than the scope's,
   * a new string on every request that each lookup would hash again.
   */
  held(scope: ReadScope): CachedResponse | undefined {
    if (!this.#tracking || !this.#leased()) return undefined;
    const entry = this.#entries.get(scope.entryKey);
    if (entry === undefined || this.#generations.get(entry.generationKey) !== entry.generation) return undefined;
    return entry;
  }

  /**
   * To be called right before a read of `scope`'s hold and generation is sent, on any connection;
   * `learnGeneration` installs what it read, unless an invalidation of the scope (or a reset) came in
   * between. Undefined while the tier does not track: nothing read now may be installed.
   */
  watch(scope: WriteScope): ScopeRead | undefined {
    if (!this.#tracking) return undefined;
    const key = scope.generationKey;
    let watch = this.#watches.get(key);
    if (watch === undefined) {
      watch = { reads: 0, invalidations: 0 };
      this.#watches.set(key, watch);
    }
    watch.reads += 1;
    return { generationKey: key, session: this.#session, invalidations: watch.invalidations, watch };
  }

  /**
   * Ends `read` (once, whatever came of it): `generation` is what it found current with no hold, or
   * null (held, none, or the read failed). Installed only if nothing spoilt the read meanwhile.
   */
  learnGeneration(read: ScopeRead, generation: string | null): void {
    const { watch, generationKey } = read;
    watch.reads -= 1;
    if (watch.reads === 0 && this.#watches.get(generationKey) === watch) this.#watches.delete(generationKey);
    if (generation !== null && this.#tracking && read.session === this.#session && read.invalidations === watch.invalidations) {
      this.#generations.set(generationKey, generation);
    }
  }

  /**
   * Keeps `entry` (which Redis holds, or which is being stored there) in memory if its generation is
   * the current one: as a lookup just learnt it, or else as read here. In the background: the caller
   * never waits.
   */
  learn(scope: ReadScope, entry: CachedResponse): void {
    if (!this.#tracking) return;
    const install = () => {
      // Checked again now: an invalidation may have come in since the generation was read.
      if (this.#tracking && this.#generations.get(scope.generationKey) === entry.generation) {
        // The header list is made once here rather than on every hit.
        this.#entries.set(scope.entryKey, { ...entry, body: ownCopy(entry.body), headerList: headerList(entry.headers), variants: ownVariants(entry.variants), generationKey: scope.generationKey });
      }
    };
    if (this.#generations.get(scope.generationKey) === entry.generation) install();
    else void this.#readGeneration(scope).then(install);
  }

  /**
   * Forgets generations this gateway renews itself (a write): called before the response to the
   * write is released, so its client never reads the old data here, even before Redis's own
   * invalidation arrives.
   */
  forget(scopes: readonly WriteScope[]): void {
    for (const scope of scopes) this.#forgetScope(scope.generationKey);
  }

  /**
   * Resolves once every tier (every gateway replica's) has applied the invalidations Redis sent
   * before now, or BARRIER_WAIT_MS later, when a tier that did not say so has let its lease lapse.
   * Called after a write's renewals, before its response leaves.
   */
  async barrier(): Promise<void> {
    const nonce = String(++this.#nonce);
    let done!: () => void;
    const acknowledged = new Promise<void>((resolve) => (done = resolve));
    const barrier = { acks: 0, expected: Infinity, done };
    this.#barriers.set(nonce, barrier);
    const waited = setTimeout(done, BARRIER_WAIT_MS);
    try {
      // Redis says how many subscribers it went to (this tier's own included).
      barrier.expected = await this.tracked.publish(this.#barrierChannel, `${this.#ackChannel} ${nonce}`);
      if (barrier.acks >= barrier.expected) done();
      await acknowledged;
    } catch {
      await acknowledged;
    } finally {
      clearTimeout(waited);
      this.#barriers.delete(nonce);
    }
  }

  /** Runs `listener` with the keys of every invalidation Redis sends (for measurements). */
  onInvalidation(listener: (keys: readonly string[]) => void): void {
    this.#invalidationListeners.push(listener);
  }

  async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    this.#reset();
    this.tracked.disconnect();
    this.subscriber.disconnect();
  }

  /** One read per scope at a time (on the tier's own connection, which lookups do not use). */
  #readGeneration(scope: WriteScope): Promise<void> {
    const key = scope.generationKey;
    const under = this.#reads.get(key);
    if (under) return under;
    const read = this.watch(scope);
    if (read === undefined) return Promise.resolve();
    const done = this.tracked.mget(scope.holdKey, key).then(
      ([hold, generation]) => this.learnGeneration(read, hold === null ? (generation ?? null) : null),
      () => this.learnGeneration(read, null),
    );
    const settled = done.finally(() => {
      if (this.#reads.get(key) === settled) this.#reads.delete(key);
    });
    this.#reads.set(key, settled);
    return settled;
  }

  /** Whether the lease lets the tier serve now; renewed in the background once half spent. */
  #leased(): boolean {
    const age = this.#leaseFrom === undefined ? Infinity : performance.now() - this.#leaseFrom;
    if (age > LEASE_MS / 2 && !this.#leasing) this.#renewLease();
    return age <= LEASE_MS;
  }

  #renewLease(): void {
    this.#leasing = true;
    const sentAt = performance.now();
    const session = this.#session;
    this.subscriber.ping().then(
      () => {
        this.#leasing = false;
        if (session === this.#session) this.#leaseFrom = sentAt;
      },
      () => (this.#leasing = false),
    );
  }

  /** Another tier's barrier reached this one: everything Redis sent before it has been applied. */
  #acknowledge(message: string): void {
    const [replyTo, nonce] = message.split(' ');
    if (replyTo !== undefined && nonce !== undefined) this.tracked.publish(replyTo, nonce).catch(() => undefined);
  }

  #acknowledged(nonce: string): void {
    const barrier = this.#barriers.get(nonce);
    if (barrier && ++barrier.acks >= barrier.expected) barrier.done();
  }

  /** Forgets what is known of a scope (by its generation key), and spoils its reads under way. */
  #forgetScope(generationKey: string): void {
    this.#generations.delete(generationKey);
    const watch = this.#watches.get(generationKey);
    if (watch) watch.invalidations += 1;
  }

  /** A key Redis says changed: a generation key, or a hold key (which stands for its scope). */
  #forgetKey(key: string): void {
    this.#forgetScope(generationKeyOfHold(key) ?? key);
  }

  /** Redis names keys with the client's REDIS_KEY_PREFIX in front; the tier knows them without it. */
  #unprefixed(key: Buffer): string {
    const name = key.toString();
    const prefix = this.tracked.options.keyPrefix ?? '';
    return name.startsWith(prefix) ? name.slice(prefix.length) : name;
  }

  #invalidated(keys: Buffer[] | null): void {
    if (keys === null) {
      // FLUSHALL / FLUSHDB: every key may have changed.
      this.#dropAll();
      this.#session += 1;
    } else {
      for (const key of keys) this.#forgetKey(this.#unprefixed(key));
    }
    if (this.#invalidationListeners.length > 0) {
      const names = keys?.map((key) => this.#unprefixed(key)) ?? [];
      for (const listener of this.#invalidationListeners) listener(names);
    }
  }

  #beat(): void {
    if (this.subscriber.status !== 'ready') return;
    if (this.#pingSentAt !== undefined) {
      if (performance.now() - this.#pingSentAt > HEARTBEAT_TIMEOUT_MS) {
        this.#pingSentAt = undefined;
        this.subscriber.disconnect(true);
      }
      return;
    }
    const sentAt = performance.now();
    this.#pingSentAt = sentAt;
    this.subscriber.ping().then(
      () => {
        if (this.#pingSentAt === sentAt) this.#pingSentAt = undefined;
      },
      () => undefined,
    );
  }

  /** SUBSCRIBEs the subscriber on each new connection (it does not resubscribe by itself: its id changes). */
  async #listen(): Promise<void> {
    const connection = this.#subscriberConnection;
    try {
      // Both in one round trip (Redis answers CLIENT ID before it enters subscriber mode).
      const [id] = await Promise.all([this.subscriber.client('ID'), this.subscriber.subscribe(INVALIDATIONS, this.#barrierChannel, this.#ackChannel)]);
      if (connection !== this.#subscriberConnection) return;
      this.#redirectTo = Number(id);
      await this.#track();
    } catch (error) {
      this.logger.warn({ err: error }, 'could not subscribe to cache invalidations: the in-memory cache is off until Redis is back');
    }
  }

  /** Turns tracking on (again), redirected to the current subscriber. */
  async #track(): Promise<void> {
    const redirect = this.#redirectTo;
    if (redirect === undefined || this.tracked.status !== 'ready') return;
    const session = this.#session;
    try {
      // Redis names the keys with the prefix in front; ioredis adds it to key arguments only. Off
      // first, in the same round trip: a connection still tracking (a new subscriber) refuses the
      // same prefixes again.
      const prefix = this.tracked.options.keyPrefix ?? '';
      await Promise.all([
        this.tracked.call('CLIENT', 'TRACKING', 'OFF'),
        this.tracked.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', String(redirect), 'BCAST', 'PREFIX', `${prefix}g:{`, 'PREFIX', `${prefix}h:{`),
      ]);
    } catch (error) {
      this.logger.warn({ err: error }, 'could not turn on Redis client tracking: the in-memory cache is off');
      return;
    }
    if (session !== this.#session || redirect !== this.#redirectTo || this.#tracking) return;
    this.#tracking = true;
    this.logger.info('redis tracks the cache generations: the in-memory cache is on');
  }

  /** Forgets everything and stops trusting what it knew; `outage` says why, none when the gateway is closing (no warning then). */
  #reset(outage?: string): void {
    const wasTracking = this.#tracking;
    this.#tracking = false;
    this.#session += 1;
    this.#leaseFrom = undefined;
    this.#dropAll();
    if (wasTracking && outage !== undefined) this.logger.warn({ reason: outage }, 'the in-memory cache is off (everything in it dropped) until Redis tracking is back');
  }

  #dropAll(): void {
    this.#entries.clear();
    this.#generations.clear();
    // Reads under way keep their watch: the session they were sent in is over, which spoils them.
    this.#watches.clear();
    this.#reads.clear();
  }
}

/** A string's bytes in V8: one a character, two if any is beyond Latin-1. */
function stringBytes(text: string): number {
  // eslint-disable-next-line no-control-regex
  return /[^\u0000-\u00ff]/.test(text) ? 2 * text.length : text.length;
}

function entrySize(key: string, entry: HeldEntry): number {
  let size = ENTRY_OVERHEAD_BYTES + stringBytes(key) + stringBytes(entry.generationKey) + entry.generation.length + representationSize(entry);
  for (const variant of Object.values(entry.variants ?? {})) size += ENTRY_OVERHEAD_BYTES + representationSize(variant);
  return size;
}

function representationSize(representation: Representation): number {
  let size = representation.body.length;
  for (const name in representation.headers) size += 16 + stringBytes(name) + stringBytes(representation.headers[name] ?? '');
  return size;
}

/** Each variant's body in a buffer of its own (see `ownCopy`), with its header list made once. */
function ownVariants(variants: Variants | undefined): Variants | undefined {
  if (!variants) return undefined;
  const own: Variants = {};
  for (const coding of CONTENT_CODINGS) {
    const variant = variants[coding];
    if (variant) own[coding] = { headers: variant.headers, body: ownCopy(variant.body), headerList: headerList(variant.headers) };
  }
  return own;
}

/**
 * The body in a buffer of its own. A slice of a larger buffer would keep all of it alive: a reply
 * from Redis, or one of Node's 8 KiB pool slabs, which `Buffer.from` uses for small copies.
 */
function ownCopy(body: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(body.length);
  body.copy(copy);
  return copy;
}

/** The tier's two Redis connections (a cache client, which fails fast, and a subscriber), from `url`. */
export function createMemoryTier(url: string, maxBytes: number, logger: Logger, options: { commandTimeoutMs?: number; keyPrefix?: string } = {}): MemoryTier {
  return new MemoryTier(createCacheClient(url, logger, options), createSubscriberClient(url), maxBytes, logger);
}
