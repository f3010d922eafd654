import { randomBytes } from 'node:crypto';
import type { Logger } from '@app/shared/platform/logger';
import type { CacheClient, CacheClientOptions, Cluster } from '../redis/client.js';
import type { CachedResponse } from './entry.js';
import { followTopology } from './memory-tier/cluster-topology.js';
import { heldEntry } from './memory-tier/held-entry.js';
import { HeldStore, type TagRead } from './memory-tier/held-store.js';
import type { NodeEvents } from './memory-tier/node-tracking.js';
import { TrackedNodes } from './memory-tier/tracked-nodes.js';
import { trackingConnections, type TierTarget, type TrackingSource } from './memory-tier/tracking-connections.js';
import { barrierChannels, WriteBarriers } from './memory-tier/write-barrier.js';
import { generationKeyOfHold, type ReadKeying, type WriteKeying } from './keys.js';

/**
 * Hot cache entries in this gateway's memory, in front of Redis, exactly as correct as Redis itself:
 * an entry is served only while its generation is known to be the current one and its scope known
 * not to be held (cache/keys.ts), and both are known only through Redis server-assisted client-side
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
 * On a Redis Cluster all of this holds per master (tracking is per node): the tier keeps the two
 * connections on every master the cluster names, a barrier goes to every master and a lease needs
 * every master's subscriber. When the masters change (a failover, a node added or removed, as the
 * tier's own cluster client learns it: every second, and on every MOVED) everything is dropped and
 * the tier serves again once every new master tracks.
 *
 * When any connection is lost, everything in memory is dropped and hits go back to Redis round
 * trips until every one is back and tracking is on again: invalidations sent meanwhile may be lost,
 * so nothing learnt before is trusted. A Redis flush (an invalidation without keys) drops everything too.
 *
 * Each of these jobs has a module in memory-tier/: a node's tracking, heartbeat and lease
 * (node-tracking.ts), every node's (tracked-nodes.ts), the cluster's masters (cluster-topology.ts),
 * the barrier (write-barrier.ts), what is held, bounded by bytes (held-store.ts, held-bytes.ts,
 * held-entry.ts), and the connections (tracking-connections.ts).
 */
export class MemoryTier {
  readonly #store: HeldStore;
  /** This tier's own generation reads under way (`learn`), one per scope, by generation key. */
  readonly #reads = new Map<string, Promise<void>>();
  #tracking = false;
  readonly #nodes: TrackedNodes;
  /** Where the tier reads generations itself: the single Redis's tracked connection, or the cluster. */
  readonly #reader: CacheClient;
  readonly #cluster: Cluster | undefined;
  /** Stops following the cluster's topology (`followTopology`). */
  readonly #unfollowTopology: () => void = () => undefined;
  readonly #invalidationListeners: ((keys: readonly string[]) => void)[] = [];
  readonly #barriers = new WriteBarriers();

  constructor(
    source: TrackingSource,
    readonly maxBytes: number,
    private readonly logger: Logger,
    private readonly keyPrefix = '',
  ) {
    this.#store = new HeldStore(maxBytes);
    const events: NodeEvents = {
      invalidated: (keys) => this.#invalidated(keys),
      barrier: (message, node) => this.#barriers.acknowledge(message, node),
      acknowledged: (nonce) => this.#barriers.acknowledged(nonce),
      lost: (reason) => this.#reset(reason),
      trackingOn: () => this.#trackingOn(),
    };
    const names = barrierChannels(keyPrefix, randomBytes(8).toString('hex'));
    this.#nodes = new TrackedNodes({ names, clustered: 'cluster' in source, keyPrefix }, events, logger);
    if ('cluster' in source) {
      this.#cluster = source.cluster;
      this.#reader = source.cluster;
      this.#unfollowTopology = followTopology(source, this.#nodes, { reset: (reason) => this.#reset(reason), trackingOn: () => this.#trackingOn() }, logger);
    } else {
      this.#reader = source.tracked;
      this.#nodes.add('', source);
    }
  }

  /** Every connection is up and every node tracks what this tier reads: it may serve and learn. */
  get tracking(): boolean {
    return this.#tracking;
  }

  /** Bytes of entries and generations held now. */
  get heldBytes(): number {
    return this.#store.heldBytes;
  }

  /** The entry for `keying`, if held, its generation still the current one, and every node's lease holds. No I/O. */
  held(keying: ReadKeying): CachedResponse | undefined {
    if (!this.#tracking || !this.#nodes.leased()) return undefined;
    return this.#store.current(keying.entryKey);
  }

  /**
   * To be called right before a read of `keying`'s hold and generation is sent, on any connection;
   * `learnGeneration` installs what it read, unless an invalidation of the scope (or a reset) came in
   * between. Undefined while the tier does not track: nothing read now may be installed.
   */
  watch(keying: WriteKeying): TagRead | undefined {
    if (!this.#tracking) return undefined;
    return this.#store.watch(keying.generationKey);
  }

  /**
   * Ends `read` (once, whatever came of it): `generation` is what it found current with no hold, or
   * null (held, none, or the read failed). Installed only if nothing spoilt the read meanwhile.
   */
  learnGeneration(read: TagRead, generation: string | null): void {
    this.#store.endRead(read, this.#tracking ? generation : null);
  }

  /**
   * Keeps `entry` (which Redis holds, or which is being stored there) in memory if its generation is
   * the current one: as a lookup just learnt it, or else as read here. In the background: the caller
   * never waits.
   */
  learn(keying: ReadKeying, entry: CachedResponse): void {
    if (!this.#tracking) return;
    const install = () => {
      // Checked again now: an invalidation may have come in since the generation was read.
      if (this.#tracking && this.#store.generation(keying.generationKey) === entry.generation) this.#store.keep(keying.entryKey, heldEntry(entry, keying.generationKey));
    };
    if (this.#store.generation(keying.generationKey) === entry.generation) install();
    else void this.#readGeneration(keying).then(install);
  }

  /**
   * Forgets generations this gateway renews itself (a write): called before the response to the
   * write is released, so its client never reads the old data here, even before Redis's own
   * invalidation arrives.
   */
  forget(keyings: readonly WriteKeying[]): void {
    for (const keying of keyings) this.#store.forgetTag(keying.generationKey);
  }

  /**
   * Resolves once every tier (every gateway replica's) has applied the invalidations Redis sent
   * before now (each master's, on a cluster), or a wait later when a tier that did not say so has
   * let its lease lapse (`WriteBarriers.barrier`). Called after a write's renewals, before its
   * response leaves.
   */
  barrier(): Promise<void> {
    return this.#barriers.barrier(this.#nodes.all());
  }

  /** Runs `listener` with the keys of every invalidation Redis sends (for measurements), until the function it returns is called. */
  onInvalidation(listener: (keys: readonly string[]) => void): () => void {
    this.#invalidationListeners.push(listener);
    return () => {
      const at = this.#invalidationListeners.indexOf(listener);
      if (at >= 0) this.#invalidationListeners.splice(at, 1);
    };
  }

  async close(): Promise<void> {
    this.#unfollowTopology();
    this.#reset();
    this.#nodes.close();
    this.#cluster?.disconnect();
  }

  /** One read per scope at a time (on the tier's own connection, which lookups do not use). */
  #readGeneration(keying: WriteKeying): Promise<void> {
    const key = keying.generationKey;
    const under = this.#reads.get(key);
    if (under) return under;
    const read = this.watch(keying);
    if (read === undefined) return Promise.resolve();
    const done = this.#reader.mget(keying.holdKey, key).then(
      ([hold, generation]) => this.learnGeneration(read, hold === null ? (generation ?? null) : null),
      () => this.learnGeneration(read, null),
    );
    const settled = done.finally(() => {
      if (this.#reads.get(key) === settled) this.#reads.delete(key);
    });
    this.#reads.set(key, settled);
    return settled;
  }

  #trackingOn(): void {
    if (this.#tracking || !this.#nodes.allTracking()) return;
    this.#tracking = true;
    this.logger.info('redis tracks the cache generations: the in-memory cache is on');
  }

  /** Redis names keys with the client's REDIS_KEY_PREFIX in front; the tier knows them without it. */
  #unprefixed(key: Buffer): string {
    const name = key.toString();
    return name.startsWith(this.keyPrefix) ? name.slice(this.keyPrefix.length) : name;
  }

  /** Keys Redis says changed: generation keys, or hold keys (each stands for its scope); none for a flush. */
  #invalidated(keys: Buffer[] | null): void {
    if (keys === null) {
      // FLUSHALL / FLUSHDB: every key may have changed.
      this.#forgetAll();
    } else {
      for (const key of keys) {
        const name = this.#unprefixed(key);
        this.#store.forgetTag(generationKeyOfHold(name) ?? name);
      }
    }
    if (this.#invalidationListeners.length > 0) {
      const names = keys?.map((key) => this.#unprefixed(key)) ?? [];
      for (const listener of this.#invalidationListeners) listener(names);
    }
  }

  /** Forgets everything and stops trusting what it knew; `outage` says why, none when the gateway is closing (no warning then). */
  #reset(outage?: string): void {
    const wasTracking = this.#tracking;
    this.#tracking = false;
    this.#nodes.endLeases();
    this.#forgetAll();
    if (wasTracking && outage !== undefined) this.logger.warn({ reason: outage }, 'the in-memory cache is off (everything in it dropped) until Redis tracking is back');
  }

  #forgetAll(): void {
    this.#store.forgetAll();
    this.#reads.clear();
  }
}

/** A tier of `maxBytes` on `where` (see `trackingConnections`). */
export function createMemoryTier(where: TierTarget, maxBytes: number, logger: Logger, options: CacheClientOptions = {}): MemoryTier {
  return new MemoryTier(trackingConnections(where, logger, options), maxBytes, logger, options.keyPrefix ?? '');
}
