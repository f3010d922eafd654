import type { Logger } from '@app/shared/platform/logger';
import { HEARTBEAT_MS, LEASE_MS, NodeTracking, type ChannelNames, type NodeConnections, type NodeEvents } from './node-tracking.js';

/** How every node's tracking is set up: the tier's channels, whether on a cluster, REDIS_KEY_PREFIX. */
export interface NodeSettings {
  names: ChannelNames;
  clustered: boolean;
  keyPrefix: string;
}

/**
 * Every node a tier tracks, by its address (`host:port` in a cluster; '' for a single Redis): their
 * heartbeat, and their tracking and leases taken together.
 */
export class TrackedNodes {
  readonly #nodes = new Map<string, NodeTracking>();
  readonly #heartbeat: NodeJS.Timeout;

  constructor(
    private readonly settings: NodeSettings,
    private readonly events: NodeEvents,
    private readonly logger: Logger,
  ) {
    this.#heartbeat = setInterval(() => {
      for (const node of this.#nodes.values()) node.beat();
    }, HEARTBEAT_MS).unref();
  }

  all(): NodeTracking[] {
    return [...this.#nodes.values()];
  }

  add(key: string, connections: NodeConnections): void {
    this.#nodes.set(key, new NodeTracking(connections, this.settings, this.events, this.logger));
  }

  /** Whether the nodes tracked are exactly `keys`. */
  are(keys: ReadonlySet<string>): boolean {
    return keys.size === this.#nodes.size && [...keys].every((key) => this.#nodes.has(key));
  }

  /** Closes the nodes not in `keys`, and adds those of `keys` not tracked yet, connected by `connect`. */
  keepOnly(keys: ReadonlySet<string>, connect: (key: string) => NodeConnections): void {
    for (const [key, node] of this.#nodes) {
      if (keys.has(key)) continue;
      this.#nodes.delete(key);
      node.close();
    }
    for (const key of keys) if (!this.#nodes.has(key)) this.add(key, connect(key));
  }

  /** Whether there is a node, and every one tracks. */
  allTracking(): boolean {
    if (this.#nodes.size === 0) return false;
    for (const node of this.#nodes.values()) if (!node.tracking) return false;
    return true;
  }

  /** Whether every node's lease lets the tier serve now (each renewed in the background once half spent). */
  leased(): boolean {
    let leased = true;
    for (const node of this.#nodes.values()) if (node.leaseAge() > LEASE_MS) leased = false;
    return leased;
  }

  endLeases(): void {
    for (const node of this.#nodes.values()) node.endLease();
  }

  close(): void {
    clearInterval(this.#heartbeat);
    for (const node of this.#nodes.values()) node.close();
    this.#nodes.clear();
  }
}
