import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Logger } from '@app/shared/platform/logger';

export type { Cluster, Redis };

/** What the cache and the rate limits talk to: one Redis, or a Redis Cluster. */
export type CacheClient = Redis | Cluster;

/** Whether a cache client talks to a Redis Cluster (its masters, `nodes`) rather than to one Redis. */
export const isClusterClient = (client: CacheClient): client is Cluster => 'nodes' in client;

export interface NodeAddress {
  host: string;
  port: number;
}

/**
 * A Redis Cluster, from its seed nodes (REDIS_CLUSTER_NODES), with the credentials and TLS every
 * node shares. `natMap` maps the addresses the nodes announce (`host:port`) to where this process
 * reaches them (a relay, a NAT).
 */
export interface ClusterTarget {
  nodes: NodeAddress[];
  username?: string;
  password?: string;
  tls?: boolean;
  natMap?: Record<string, NodeAddress>;
}

/** A single Redis by its URL (REDIS_URL), or a cluster. */
export type RedisTarget = string | ClusterTarget;

export const isCluster = (target: RedisTarget): target is ClusterTarget => typeof target !== 'string';

/**
 * A REDIS_CLUSTER_NODES item: `host:port`, or a URL (`redis://[user:password@]host:port`,
 * `rediss://…` for TLS) as REDIS_URL has it.
 */
export function parseClusterNode(item: string): URL | undefined {
  const text = /^[a-z]+:\/\//.test(item) ? item : `redis://${item}`;
  if (!URL.canParse(text)) return undefined;
  const url = new URL(text);
  return ['redis:', 'rediss:'].includes(url.protocol) && url.hostname !== '' && url.port !== '' && ['', '/'].includes(url.pathname) ? url : undefined;
}

/** Where the gateway's Redis is: the cluster REDIS_CLUSTER_NODES names when set, else REDIS_URL. */
export function redisTarget(config: { REDIS_URL: string; REDIS_CLUSTER_NODES: readonly string[] }): RedisTarget {
  const urls = config.REDIS_CLUSTER_NODES.map(parseClusterNode).filter((url) => url !== undefined);
  if (urls.length === 0) return config.REDIS_URL;
  // The first item that names credentials names them for all: every node of a cluster shares them.
  const withCredentials = urls.find((url) => url.username !== '' || url.password !== '');
  return {
    nodes: urls.map((url) => ({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port) })),
    username: withCredentials?.username ? decodeURIComponent(withCredentials.username) : undefined,
    password: withCredentials?.password ? decodeURIComponent(withCredentials.password) : undefined,
    tls: urls.some((url) => url.protocol === 'rediss:'),
  };
}

/** Redis refused a command that needs memory: maxmemory is reached and nothing may be evicted. */
export const isOutOfMemory = (error: unknown): boolean => error instanceof Error && error.name === 'ReplyError' && /\bOOM\b/.test(error.message);

/**
 * A connection is ready as soon as it connects: RESP2, so no HELLO, and no other handshake command
 * (CLIENT SETINFO) or ready check (INFO) before it. Under load the gateway's event loop reads each
 * reply late, a whole busy iteration, so every round trip before 'ready' delays the
 * cache's return after an outage by that much. A Redis still loading its data answers LOADING
 * errors meanwhile, which are misses like any other error.
 */
const readyOnConnect = { protocol: 2, enableReadyCheck: false, disableClientInfo: true } as const;

/**
 * Reconnecting is cheap (a refused connection costs nothing), and every second of a lost
 * connection is a second without the cache: try five times a second.
 */
const reconnectSoon = (attempt: number) => Math.min(attempt * 50, 200);

/**
 * A Redis client for a cache: it never queues. While Redis is unreachable every command fails at
 * once (no offline queue, no retries); the client reconnects in the background. A command with no
 * reply fails after `commandTimeoutMs` at the latest: a hard stop, so a hung Redis
 * never holds commands for ever. A caller that must tell a slow reply from a late read of a busy
 * event loop judges that itself (the gateway's RedisHealth), within this stop: a plain timer here
 * fires late when the event loop is busy. Callers treat failures as misses. `keyPrefix` goes in front
 * of every key, as REDIS_KEY_PREFIX says.
 */
export function createCacheClient(target: string, logger: Logger, options?: CacheClientOptions): Redis;
export function createCacheClient(target: RedisTarget, logger: Logger, options?: CacheClientOptions): CacheClient;
export function createCacheClient(target: RedisTarget, logger: Logger, options: CacheClientOptions = {}): CacheClient {
  const client = isCluster(target) ? createClusterClient(target, options) : new Redis(target, { ...cacheConnection(options), enableOfflineQueue: false, retryStrategy: reconnectSoon });
  // Say it once per outage, not once per reconnection attempt.
  let reachable = true;
  client.on('ready', () => {
    if (!reachable) logger.info('redis is reachable again');
    reachable = true;
  });
  client.on('error', (error: Error) => {
    if (reachable) logger.warn({ err: error }, 'redis is unreachable: the cache is bypassed until it returns');
    reachable = false;
  });
  return client;
}

export interface CacheClientOptions {
  commandTimeoutMs?: number;
  keyPrefix?: string;
}

/** The settings of every connection of a cache client, to one Redis or to each node of a cluster. */
function cacheConnection(options: CacheClientOptions): RedisOptions {
  return {
    // ioredis puts it in front of every key a command names (EVAL's KEYS included).
    keyPrefix: options.keyPrefix ?? '',
    maxRetriesPerRequest: 0,
    commandTimeout: options.commandTimeoutMs ?? 10_000,
    connectTimeout: 1_000,
    ...readyOnConnect,
    // Commands that concurrent requests issue in the same tick go to Redis in one write.
    enableAutoPipelining: true,
  };
}

/** The credentials and TLS of a cluster's nodes, for a connection to one of them. */
export function nodeCredentials(target: ClusterTarget): RedisOptions {
  return { username: target.username, password: target.password, ...(target.tls ? { tls: {} } : {}) };
}

/**
 * An ioredis Cluster that fails fast as the single-node client does: no offline queue, and a command
 * for a node that is down fails at once rather than waiting for a failover (the cache bypasses,
 * the rate limits count in memory meanwhile). It learns the topology again every second and on
 * every MOVED, so the slots of a failed-over master are served by its successor soon after.
 */
export function createClusterClient(target: ClusterTarget, options: CacheClientOptions = {}, natMap: ClusterOptions['natMap'] = target.natMap): Cluster {
  const { keyPrefix, enableAutoPipelining, ...connection } = cacheConnection(options);
  const cluster = new Cluster(target.nodes, {
    keyPrefix,
    enableAutoPipelining,
    enableOfflineQueue: false,
    // As on one node: no round trip (CLUSTER INFO) before 'ready'; a cluster that cannot serve a slot says so per command.
    enableReadyCheck: false,
    retryDelayOnFailover: 0,
    retryDelayOnClusterDown: 0,
    retryDelayOnTryAgain: 0,
    clusterRetryStrategy: reconnectSoon,
    // The topology is asked for by the timer below: ioredis's own one is started again by a refresh
    // that was under way when the client was closed, and then runs for ever.
    slotsRefreshInterval: 0,
    // A plain timer: under load it fires late, after replies that came in time; beyond a few busy turns.
    slotsRefreshTimeout: 5_000,
    natMap,
    // TLS names the node it connects to: the address it announces, not a resolved IP.
    ...(target.tls ? { dnsLookup: (address: string, callback: (error: null, address: string) => void) => callback(null, address) } : {}),
    redisOptions: { ...connection, ...nodeCredentials(target) },
  });
  // ioredis opens a node's connection on its first command; opened at once instead, a master's
  // connection says whether the cluster is reachable (RedisHealth) before anything is sent.
  cluster.on('+node', (node: Redis) => {
    if (node.status === 'wait') node.connect().catch(() => undefined);
  });
  const refresh = setInterval(() => {
    if (cluster.status === 'ready') cluster.refreshSlotsCache();
  }, TOPOLOGY_REFRESH_MS).unref();
  cluster.once('end', () => clearInterval(refresh));
  return cluster;
}

/**
 * A connection to one node of a cluster that fails fast, as a cache client does; its errors are not
 * reported (the cluster's cache client reports outages).
 */
export function createNodeClient(node: NodeAddress & RedisOptions, options: CacheClientOptions = {}): Redis {
  const client = new Redis({ ...node, ...cacheConnection(options), enableOfflineQueue: false, retryStrategy: reconnectSoon });
  client.on('error', () => undefined);
  return client;
}

/** How often a cluster client asks for the topology (besides on every MOVED). */
export const TOPOLOGY_REFRESH_MS = 1_000;

/**
 * A RESP2 connection for SUBSCRIBE (in RESP2, client-tracking invalidations redirected to it come as
 * messages on `__redis__:invalidate`), which reconnects in the background and does not resubscribe
 * by itself (the caller does, on each 'ready': a new connection has a new client id). Its errors are
 * not reported: the cache client on the same Redis reports outages.
 */
export function createSubscriberClient(where: string | (NodeAddress & RedisOptions)): Redis {
  const settings: RedisOptions = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1_000,
    ...readyOnConnect,
    autoResubscribe: false,
    retryStrategy: reconnectSoon,
  };
  const client = typeof where === 'string' ? new Redis(where, settings) : new Redis({ ...where, ...settings });
  client.on('error', () => undefined);
  return client;
}
