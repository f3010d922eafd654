import { randomBytes } from 'node:crypto';
import type { Logger } from '@app/shared/platform/logger';
import { LRUCache } from 'lru-cache';
import {
  createCacheClient,
  createClusterClient,
  createNodeClient,
  createSubscriberClient,
  isCluster,
  nodeCredentials,
  type CacheClient,
  type CacheClientOptions,
  type Cluster,
  type ClusterTarget,
  type NodeAddress,
  type Redis,
  type RedisTarget,
} from '../redis.js';
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

/** One Redis node's two connections: one that turns tracking on, one that hears the node's invalidations. */
export interface NodeConnections {
  tracked: Redis;
  subscriber: Redis;
}

/**
 * Every master of a cluster: `cluster` says which they are (a client of the tier's own, which also
 * reads generations), `connect` opens a master's two connections from its address there.
 */
export interface ClusterTracking {
  cluster: Cluster;
  connect(nodeKey: string): NodeConnections;
}

/** Where a tier hears invalidations: one Redis, or each master of a cluster. */
export type TrackingSource = NodeConnections | ClusterTracking;

/** What a node's tracking tells its tier. */
interface NodeEvents {
  invalidated(keys: Buffer[] | null): void;
  /** Another tier's barrier, published on `node`. */
  barrier(message: string, node: NodeTracking): void;
  acknowledged(nonce: string): void;
  /** A connection was lost: invalidations may have been missed. */
  lost(reason: string): void;
  trackingOn(): void;
}

/** The channel names every tier shares (the barrier's) and this tier's own (its acknowledgements'). */
interface ChannelNames {
  barrier: string;
  ack: string;
}

/**
 * Tracking on one Redis node (the only one, or a cluster master): `CLIENT TRACKING … BCAST` on the
 * tracked connection, redirected to the subscriber on the same node, which hears the node's
 * invalidations and the barriers published there; the subscriber's heartbeat and lease. A PUBLISH
 * on a cluster reaches the subscribers of every node, so there each channel carries the node's id:
 * a barrier is heard only on the node it was published on, behind that node's invalidations.
 */
class NodeTracking {
  tracking = false;
  /** The channels on this node, once its subscriber listens. */
  channels: ChannelNames | undefined;
  /** The subscriber's client id once it listens on its current connection. */
  #redirectTo: number | undefined;
  /** Bumped whenever either connection is lost. */
  #epoch = 0;
  #closed = false;
  /** When the unanswered ping was sent (performance.now()), if one is. */
  #pingSentAt: number | undefined;
  /** When the last ping answered on the subscriber was sent (performance.now()): the lease. */
  #leaseFrom: number | undefined;
  #leaseEpoch = 0;
  #leasing = false;

  constructor(
    readonly connections: NodeConnections,
    private readonly settings: { names: ChannelNames; clustered: boolean; keyPrefix: string },
    private readonly events: NodeEvents,
    private readonly logger: Logger,
  ) {
    const { tracked, subscriber } = connections;
    subscriber.on('messageBuffer', (channel: Buffer, message: Buffer | Buffer[] | null) => {
      if (this.#closed) return;
      const name = channel.toString();
      if (name === INVALIDATIONS) events.invalidated(message as Buffer[] | null);
      else if (name === this.channels?.barrier) events.barrier(String(message), this);
      else if (name === this.channels?.ack) events.acknowledged(String(message));
    });
    subscriber.on('ready', () => void this.#listen());
    subscriber.on('close', () => {
      this.#pingSentAt = undefined;
      this.#redirectTo = undefined;
      this.#lost('the invalidation subscriber lost its connection');
    });
    tracked.on('ready', () => void this.#track());
    tracked.on('close', () => this.#lost('the tracking connection was lost'));
    if (subscriber.status === 'ready') void this.#listen();
  }

  /** How long ago the ping holding this node's lease was sent (ms); renewed in the background once half spent. */
  leaseAge(): number {
    const age = this.#leaseFrom === undefined ? Infinity : performance.now() - this.#leaseFrom;
    if (age > LEASE_MS / 2 && !this.#leasing) this.#renewLease();
    return age;
  }

  /** What the lease said no longer holds (the tier forgot everything). */
  endLease(): void {
    this.#leaseFrom = undefined;
    this.#leaseEpoch += 1;
  }

  /** Pings the subscriber; one unanswered for HEARTBEAT_TIMEOUT_MS drops its connection. */
  beat(): void {
    const { subscriber } = this.connections;
    if (subscriber.status !== 'ready') return;
    if (this.#pingSentAt !== undefined) {
      if (performance.now() - this.#pingSentAt > HEARTBEAT_TIMEOUT_MS) {
        this.#pingSentAt = undefined;
        subscriber.disconnect(true);
      }
      return;
    }
    const sentAt = performance.now();
    this.#pingSentAt = sentAt;
    subscriber.ping().then(
      () => {
        if (this.#pingSentAt === sentAt) this.#pingSentAt = undefined;
      },
      () => undefined,
    );
  }

  /**
   * Closes its connections. Their events may still come (a `close` after a topology change
   * dropped this node): they say nothing of the tier any more, so they reach it no more.
   */
  close(): void {
    this.#closed = true;
    this.#epoch += 1;
    this.tracking = false;
    this.connections.tracked.disconnect();
    this.connections.subscriber.disconnect();
  }

  #lost(reason: string): void {
    if (this.#closed) return;
    this.#epoch += 1;
    this.tracking = false;
    this.events.lost(reason);
  }

  #renewLease(): void {
    this.#leasing = true;
    const sentAt = performance.now();
    const epoch = this.#leaseEpoch;
    this.connections.subscriber.ping().then(
      () => {
        this.#leasing = false;
        if (epoch === this.#leaseEpoch) this.#leaseFrom = sentAt;
      },
      () => (this.#leasing = false),
    );
  }

  /** This node's channels: in a cluster, named after its node id. */
  async #channels(): Promise<ChannelNames> {
    const { names, clustered } = this.settings;
    if (!clustered) return names;
    const id = String(await this.connections.subscriber.call('CLUSTER', 'MYID'));
    return { barrier: `${names.barrier}:${id}`, ack: `${names.ack}:${id}` };
  }

  /** SUBSCRIBEs the subscriber on each new connection (it does not resubscribe by itself: its id changes). */
  async #listen(): Promise<void> {
    const epoch = this.#epoch;
    const { subscriber } = this.connections;
    try {
      const channels = await this.#channels();
      this.channels = channels;
      // Both in one round trip (Redis answers CLIENT ID before it enters subscriber mode).
      const [id] = await Promise.all([subscriber.client('ID'), subscriber.subscribe(INVALIDATIONS, channels.barrier, channels.ack)]);
      if (epoch !== this.#epoch) return;
      this.#redirectTo = Number(id);
      await this.#track();
    } catch (error) {
      this.logger.warn({ err: error }, 'could not subscribe to cache invalidations: the in-memory cache is off until Redis is back');
    }
  }

  /** Turns tracking on (again), redirected to the current subscriber. */
  async #track(): Promise<void> {
    const redirect = this.#redirectTo;
    const { tracked } = this.connections;
    if (redirect === undefined || tracked.status !== 'ready') return;
    const epoch = this.#epoch;
    try {
      // Redis names the keys with the prefix in front; ioredis adds it to key arguments only. Off
      // first, in the same round trip: a connection still tracking (a new subscriber) refuses the
      // same prefixes again.
      const prefix = this.settings.keyPrefix;
      await Promise.all([
        tracked.call('CLIENT', 'TRACKING', 'OFF'),
        tracked.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', String(redirect), 'BCAST', 'PREFIX', `${prefix}g:{`, 'PREFIX', `${prefix}h:{`),
      ]);
    } catch (error) {
      this.logger.warn({ err: error }, 'could not turn on Redis client tracking: the in-memory cache is off');
      return;
    }
    if (epoch !== this.#epoch || redirect !== this.#redirectTo || this.tracking) return;
    this.tracking = true;
    this.events.trackingOn();
  }
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
  /** Bumped whenever what was learnt can no longer be trusted (a connection lost, a flush, a new topology). */
  #session = 0;
  #tracking = false;
  /** Each node tracked, by its address (`host:port` in a cluster; '' for a single Redis). */
  readonly #nodes = new Map<string, NodeTracking>();
  /** Where the tier reads generations itself: the single Redis's tracked connection, or the cluster. */
  readonly #reader: CacheClient;
  readonly #cluster: Cluster | undefined;
  /** What the tier listens to on its cluster client (`#followTopology`), taken off when it closes. */
  #topologyListeners: (readonly [string, () => void])[] = [];
  readonly #invalidationListeners: ((keys: readonly string[]) => void)[] = [];
  /** This tier's barriers (`barrier`) waiting for acknowledgements, by nonce. */
  readonly #barriers = new Map<string, { acks: number; expected: number; done: () => void }>();
  #nonce = 0;
  readonly #names: ChannelNames;
  readonly #heartbeat: NodeJS.Timeout;

  constructor(
    source: TrackingSource,
    readonly maxBytes: number,
    private readonly logger: Logger,
    private readonly keyPrefix = '',
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
    this.#names = { barrier: `${keyPrefix}gateway:barrier`, ack: `${keyPrefix}gateway:barrier-ack:${randomBytes(8).toString('hex')}` };
    if ('cluster' in source) {
      this.#cluster = source.cluster;
      this.#reader = source.cluster;
      this.#followTopology(source);
    } else {
      this.#reader = source.tracked;
      this.#addNode('', source);
    }
    this.#heartbeat = setInterval(() => {
      for (const node of this.#nodes.values()) node.beat();
    }, HEARTBEAT_MS).unref();
  }

  /** Every connection is up and every node tracks what this tier reads: it may serve and learn. */
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
   * before now (each master's, on a cluster), or BARRIER_WAIT_MS later, when a tier that did not say
   * so has let its lease lapse. Called after a write's renewals, before its response leaves.
   */
  async barrier(): Promise<void> {
    const nonces: string[] = [];
    let waited: NodeJS.Timeout | undefined;
    const timeUp = new Promise<void>((resolve) => (waited = setTimeout(resolve, BARRIER_WAIT_MS)));
    // With no node known (a cluster client not ready yet) nothing can be published: the wait is
    // what makes every other tier's lease lapse.
    const acknowledged = this.#nodes.size === 0 ? timeUp : Promise.all([...this.#nodes.values()].map((node) => this.#barrierOn(node, nonces)));
    try {
      await Promise.race([acknowledged, timeUp]);
    } finally {
      clearTimeout(waited);
      for (const nonce of nonces) this.#barriers.delete(nonce);
    }
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
    clearInterval(this.#heartbeat);
    // Before the cluster client disconnects: its last events must not open connections again. Only
    // the tier's own listeners: ioredis ends a closing client through listeners of its own.
    for (const [event, listener] of this.#topologyListeners) this.#cluster?.off(event, listener);
    this.#reset();
    for (const node of this.#nodes.values()) node.close();
    this.#nodes.clear();
    this.#cluster?.disconnect();
  }

  /**
   * Resolves once every tier listening on `node` has acknowledged a barrier published there; never
   * when it cannot be published (`barrier` waits out its time then).
   */
  #barrierOn(node: NodeTracking, nonces: string[]): Promise<void> {
    const channels = node.channels;
    if (channels === undefined) return new Promise(() => undefined);
    const nonce = String(++this.#nonce);
    nonces.push(nonce);
    return new Promise<void>((done) => {
      const barrier = { acks: 0, expected: Infinity, done };
      this.#barriers.set(nonce, barrier);
      // Redis says how many subscribers it went to (this tier's own included): on a cluster, on this node.
      node.connections.tracked.publish(channels.barrier, `${channels.ack} ${nonce}`).then(
        (expected) => {
          barrier.expected = expected;
          if (barrier.acks >= expected) done();
        },
        () => undefined,
      );
    });
  }

  /** One read per scope at a time (on the tier's own connection, which lookups do not use). */
  #readGeneration(scope: WriteScope): Promise<void> {
    const key = scope.generationKey;
    const under = this.#reads.get(key);
    if (under) return under;
    const read = this.watch(scope);
    if (read === undefined) return Promise.resolve();
    const done = this.#reader.mget(scope.holdKey, key).then(
      ([hold, generation]) => this.learnGeneration(read, hold === null ? (generation ?? null) : null),
      () => this.learnGeneration(read, null),
    );
    const settled = done.finally(() => {
      if (this.#reads.get(key) === settled) this.#reads.delete(key);
    });
    this.#reads.set(key, settled);
    return settled;
  }

  /** Whether every node's lease lets the tier serve now (each renewed in the background once half spent). */
  #leased(): boolean {
    let leased = true;
    for (const node of this.#nodes.values()) if (node.leaseAge() > LEASE_MS) leased = false;
    return leased;
  }

  #addNode(key: string, connections: NodeConnections): void {
    const events: NodeEvents = {
      invalidated: (keys) => this.#invalidated(keys),
      barrier: (message, node) => this.#acknowledge(message, node),
      acknowledged: (nonce) => this.#acknowledged(nonce),
      lost: (reason) => this.#reset(reason),
      trackingOn: () => this.#trackingOn(),
    };
    const settings = { names: this.#names, clustered: this.#cluster !== undefined, keyPrefix: this.keyPrefix };
    this.#nodes.set(key, new NodeTracking(connections, settings, events, this.logger));
  }

  /** Keeps one node tracking per master of the cluster, as its client sees them. */
  #followTopology(source: ClusterTracking): void {
    const follow = () => this.#updateTopology(source);
    const lost = () => this.#reset('the cluster client lost its connections');
    this.#topologyListeners = [
      ...['ready', 'refresh', '+node', '-node'].map((event) => [event, follow] as const),
      ['close', lost] as const,
    ];
    for (const [event, listener] of this.#topologyListeners) source.cluster.on(event, listener);
    // An outage makes one a reconnection: logged once a minute at most, not dropped unseen.
    let loggedAt = -Infinity;
    source.cluster.on('error', (error: Error) => {
      if (performance.now() - loggedAt < 60_000) return;
      loggedAt = performance.now();
      this.logger.warn({ err: error }, 'the cluster client of the in-memory cache reported an error (logged once a minute at most)');
    });
  }

  #updateTopology(source: ClusterTracking): void {
    const masters = new Set<string>();
    for (const nodes of source.cluster.slots) if (nodes?.[0] !== undefined) masters.add(nodes[0]);
    if (masters.size === this.#nodes.size && [...masters].every((key) => this.#nodes.has(key))) return;
    this.#reset('the cluster topology changed');
    for (const [key, node] of this.#nodes) {
      if (masters.has(key)) continue;
      this.#nodes.delete(key);
      node.close();
    }
    for (const key of masters) if (!this.#nodes.has(key)) this.#addNode(key, source.connect(key));
    this.logger.info({ masters: [...masters] }, 'the in-memory cache tracks the cluster masters');
    // The masters that stayed still track; with none new (one only left), no event of theirs
    // would turn the tier on again.
    this.#trackingOn();
  }

  #trackingOn(): void {
    if (this.#tracking || this.#nodes.size === 0) return;
    for (const node of this.#nodes.values()) if (!node.tracking) return;
    this.#tracking = true;
    this.logger.info('redis tracks the cache generations: the in-memory cache is on');
  }

  /** Another tier's barrier reached this one on `node`: everything the node sent before it has been applied. */
  #acknowledge(message: string, node: NodeTracking): void {
    const [replyTo, nonce] = message.split(' ');
    if (replyTo !== undefined && nonce !== undefined) node.connections.tracked.publish(replyTo, nonce).catch(() => undefined);
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
    return name.startsWith(this.keyPrefix) ? name.slice(this.keyPrefix.length) : name;
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

  /** Forgets everything and stops trusting what it knew; `outage` says why, none when the gateway is closing (no warning then). */
  #reset(outage?: string): void {
    const wasTracking = this.#tracking;
    this.#tracking = false;
    this.#session += 1;
    for (const node of this.#nodes.values()) node.endLease();
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

/**
 * The tier's connections: a cache client (which fails fast) and a subscriber on `where`, or, on a
 * cluster, a client of its own and the two on every master. `where` may name the tracked and the
 * subscriber connections apart (a test cuts one of them).
 */
export function createMemoryTier(
  where: RedisTarget | { tracked: RedisTarget; subscriber: RedisTarget },
  maxBytes: number,
  logger: Logger,
  options: CacheClientOptions = {},
): MemoryTier {
  const { tracked, subscriber } = typeof where === 'object' && 'tracked' in where ? where : { tracked: where, subscriber: where };
  const keyPrefix = options.keyPrefix ?? '';
  if (!isCluster(tracked) && !isCluster(subscriber)) {
    return new MemoryTier({ tracked: createCacheClient(tracked, logger, options), subscriber: createSubscriberClient(subscriber) }, maxBytes, logger, keyPrefix);
  }
  if (!isCluster(tracked) || !isCluster(subscriber)) throw new Error('the tracked and subscriber connections go to one kind of Redis: both a cluster or both not');
  return new MemoryTier(clusterTracking(tracked, subscriber, options), maxBytes, logger, keyPrefix);
}

/** `host:port` as a node address (the host may be an IPv6 address, colons and all). */
function addressOf(nodeKey: string): NodeAddress {
  const colon = nodeKey.lastIndexOf(':');
  return { host: nodeKey.slice(0, colon), port: Number(nodeKey.slice(colon + 1)) };
}

/**
 * A cluster client that learns the masters, and each master's connections: the tracked one where
 * the client reaches the master, the subscriber where `subscriber`'s natMap says the address the
 * master announces is reached (the same place, unless a test relays them apart).
 */
function clusterTracking(tracked: ClusterTarget, subscriber: ClusterTarget, options: CacheClientOptions): ClusterTracking {
  const announcedAs = new Map<string, string>();
  const natMap = (announced: string) => {
    const mapped = tracked.natMap?.[announced];
    if (mapped) announcedAs.set(`${mapped.host}:${mapped.port}`, announced);
    return mapped ?? null;
  };
  return {
    cluster: createClusterClient(tracked, options, natMap),
    connect: (nodeKey) => {
      const announced = announcedAs.get(nodeKey) ?? nodeKey;
      return {
        tracked: createNodeClient({ ...addressOf(nodeKey), ...nodeCredentials(tracked) }, options),
        subscriber: createSubscriberClient({ ...(subscriber.natMap?.[announced] ?? addressOf(announced)), ...nodeCredentials(subscriber) }),
      };
    },
  };
}
