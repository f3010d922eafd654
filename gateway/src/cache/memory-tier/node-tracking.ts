import type { Logger } from '@app/shared/platform/logger';
import type { Redis } from '../../redis/client.js';

/** The channel Redis publishes invalidations on for a client tracking keys in RESP2 redirect mode. */
const INVALIDATIONS = '__redis__:invalidate';

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
export const LEASE_MS = 200;

/** One Redis node's two connections: one that turns tracking on, one that hears the node's invalidations. */
export interface NodeConnections {
  tracked: Redis;
  subscriber: Redis;
}

/** What a node's tracking tells its tier. */
export interface NodeEvents {
  invalidated(keys: Buffer[] | null): void;
  /** Another tier's barrier, published on `node`. */
  barrier(message: string, node: NodeTracking): void;
  acknowledged(nonce: string): void;
  /** A connection was lost: invalidations may have been missed. */
  lost(reason: string): void;
  trackingOn(): void;
}

/** The channel names every tier shares (the barrier's) and this tier's own (its acknowledgements'). */
export interface ChannelNames {
  barrier: string;
  ack: string;
}

/** The channels `names` on the cluster node `nodeId`: a PUBLISH there reaches every node's subscribers. */
export function nodeChannels(names: ChannelNames, nodeId: string): ChannelNames {
  return { barrier: `${names.barrier}:${nodeId}`, ack: `${names.ack}:${nodeId}` };
}

/**
 * Tracking on one Redis node (the only one, or a cluster master): `CLIENT TRACKING … BCAST` on the
 * tracked connection, redirected to the subscriber on the same node, which hears the node's
 * invalidations and the barriers published there; the subscriber's heartbeat and lease. A PUBLISH
 * on a cluster reaches the subscribers of every node, so there each channel carries the node's id:
 * a barrier is heard only on the node it was published on, behind that node's invalidations.
 */
export class NodeTracking {
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
    return nodeChannels(names, String(await this.connections.subscriber.call('CLUSTER', 'MYID')));
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
