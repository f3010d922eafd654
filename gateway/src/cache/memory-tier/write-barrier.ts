import { LEASE_MS, type ChannelNames, type NodeTracking } from './node-tracking.js';

/** A write's barrier waits at most this long for every tier's acknowledgement: beyond the lease. */
const BARRIER_WAIT_MS = LEASE_MS + 50;

/** The barrier's channel, which every tier shares, and the acknowledgements' channel of the tier `tierId`. */
export function barrierChannels(keyPrefix: string, tierId: string): ChannelNames {
  return { barrier: `${keyPrefix}gateway:barrier`, ack: `${keyPrefix}gateway:barrier-ack:${tierId}` };
}

/**
 * A tier's write barriers, and its acknowledgements of other tiers': a barrier published on a node
 * reaches every tier's subscriber there behind the invalidations queued before it, and each tier
 * acknowledges it on the publisher's own channel once it has applied them.
 */
export class WriteBarriers {
  /** This tier's barriers waiting for acknowledgements, by nonce. */
  readonly #waiting = new Map<string, { acks: number; expected: number; done: () => void }>();
  #nonce = 0;

  /**
   * Resolves once every tier listening on `nodes` has acknowledged a barrier published on each, or
   * BARRIER_WAIT_MS later, when a tier that did not say so has let its lease lapse.
   */
  async barrier(nodes: readonly NodeTracking[]): Promise<void> {
    const nonces: string[] = [];
    let waited: NodeJS.Timeout | undefined;
    const timeUp = new Promise<void>((resolve) => (waited = setTimeout(resolve, BARRIER_WAIT_MS)));
    // With no node known (a cluster client not ready yet) nothing can be published: the wait is
    // what makes every other tier's lease lapse.
    const acknowledged = nodes.length === 0 ? timeUp : Promise.all(nodes.map((node) => this.#barrierOn(node, nonces)));
    try {
      await Promise.race([acknowledged, timeUp]);
    } finally {
      clearTimeout(waited);
      for (const nonce of nonces) this.#waiting.delete(nonce);
    }
  }

  /** Another tier's barrier reached this one on `node`: everything the node sent before it has been applied. */
  acknowledge(message: string, node: NodeTracking): void {
    const [replyTo, nonce] = message.split(' ');
    if (replyTo !== undefined && nonce !== undefined) node.connections.tracked.publish(replyTo, nonce).catch(() => undefined);
  }

  acknowledged(nonce: string): void {
    const barrier = this.#waiting.get(nonce);
    if (barrier && ++barrier.acks >= barrier.expected) barrier.done();
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
      this.#waiting.set(nonce, barrier);
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
}
