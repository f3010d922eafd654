import type { Logger } from '@app/shared/platform/logger';
import type { Cluster } from '../../redis/client.js';
import type { NodeConnections } from './node-tracking.js';
import type { TrackedNodes } from './tracked-nodes.js';

/**
 * Every master of a cluster: `cluster` says which they are (a client of the tier's own, which also
 * reads generations), `connect` opens a master's two connections from its address there.
 */
export interface ClusterTracking {
  cluster: Cluster;
  connect(nodeKey: string): NodeConnections;
}

/** What following a cluster's topology asks of its tier. */
export interface TopologyEvents {
  /** Forget everything: the masters changed, or the cluster client lost its connections. */
  reset(reason: string): void;
  /** Every node may track now: the masters that stayed still do. */
  trackingOn(): void;
}

/** The masters a cluster client's slots name: the first node of each slot's. */
export function mastersOf(slots: readonly (readonly string[] | undefined)[]): Set<string> {
  const masters = new Set<string>();
  for (const nodes of slots) if (nodes?.[0] !== undefined) masters.add(nodes[0]);
  return masters;
}

/**
 * Keeps one node in `nodes` tracking per master of the cluster, as its client sees them: every
 * second, and on every MOVED. Returns what stops it (before the client disconnects: its last
 * events must not open connections again).
 */
export function followTopology(source: ClusterTracking, nodes: TrackedNodes, tier: TopologyEvents, logger: Logger): () => void {
  const follow = () => updateTopology(source, nodes, tier, logger);
  const lost = () => tier.reset('the cluster client lost its connections');
  const listeners = [...['ready', 'refresh', '+node', '-node'].map((event) => [event, follow] as const), ['close', lost] as const];
  for (const [event, listener] of listeners) source.cluster.on(event, listener);
  // An outage makes one a reconnection: logged once a minute at most, not dropped unseen.
  let loggedAt = -Infinity;
  source.cluster.on('error', (error: Error) => {
    if (performance.now() - loggedAt < 60_000) return;
    loggedAt = performance.now();
    logger.warn({ err: error }, 'the cluster client of the in-memory cache reported an error (logged once a minute at most)');
  });
  // Only the tier's own listeners: ioredis ends a closing client through listeners of its own.
  return () => {
    for (const [event, listener] of listeners) source.cluster.off(event, listener);
  };
}

/** When the masters changed: everything is dropped, and the tier serves again once every new master tracks. */
function updateTopology(source: ClusterTracking, nodes: TrackedNodes, tier: TopologyEvents, logger: Logger): void {
  const masters = mastersOf(source.cluster.slots);
  if (nodes.are(masters)) return;
  tier.reset('the cluster topology changed');
  nodes.keepOnly(masters, (key) => source.connect(key));
  logger.info({ masters: [...masters] }, 'the in-memory cache tracks the cluster masters');
  // The masters that stayed still track; with none new (one only left), no event of theirs
  // would turn the tier on again.
  tier.trackingOn();
}
