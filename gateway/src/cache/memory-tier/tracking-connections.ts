import type { Logger } from '@app/shared/platform/logger';
import {
  createCacheClient,
  createClusterClient,
  createNodeClient,
  createSubscriberClient,
  isCluster,
  nodeCredentials,
  type CacheClientOptions,
  type ClusterTarget,
  type NodeAddress,
  type RedisTarget,
} from '../../redis/client.js';
import type { ClusterTracking } from './cluster-topology.js';
import type { NodeConnections } from './node-tracking.js';

/** Where a tier hears invalidations: one Redis, or each master of a cluster. */
export type TrackingSource = NodeConnections | ClusterTracking;

/** Where a tier's connections go: one place, or the tracked and the subscriber connections apart (a test cuts one of them). */
export type TierTarget = RedisTarget | { tracked: RedisTarget; subscriber: RedisTarget };

/**
 * A tier's connections: a cache client (which fails fast) and a subscriber on `where`, or, on a
 * cluster, a client of its own and the two on every master.
 */
export function trackingConnections(where: TierTarget, logger: Logger, options: CacheClientOptions): TrackingSource {
  const { tracked, subscriber } = typeof where === 'object' && 'tracked' in where ? where : { tracked: where, subscriber: where };
  if (!isCluster(tracked) && !isCluster(subscriber)) return { tracked: createCacheClient(tracked, logger, options), subscriber: createSubscriberClient(subscriber) };
  if (!isCluster(tracked) || !isCluster(subscriber)) throw new Error('the tracked and subscriber connections go to one kind of Redis: both a cluster or both not');
  return clusterTracking(tracked, subscriber, options);
}

/** `host:port` as a node address (the host may be an IPv6 address, colons and all). */
export function addressOf(nodeKey: string): NodeAddress {
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
