import { Redis } from 'ioredis';
import { redisTarget, type ClusterTarget, type NodeAddress, type RedisTarget } from '../../gateway/src/redis/client.js';
import { TcpProxy } from '../../tools/tcp-proxy.js';

/** The cluster a run of tests uses (TEST_REDIS_CLUSTER_NODES, set by the global setup). */
export function testCluster(): ClusterTarget {
  const nodes = process.env.TEST_REDIS_CLUSTER_NODES;
  if (!nodes) throw new Error('TEST_REDIS_CLUSTER_NODES is not set: run the tests through jest (its global setup starts the cluster)');
  // Read as the gateway reads REDIS_CLUSTER_NODES.
  return redisTarget({ REDIS_URL: '', REDIS_CLUSTER_NODES: nodes.split(',') }) as ClusterTarget;
}

/** Whether this test file runs against the cluster (the jest project `cluster`) rather than the single Redis. */
export const onCluster = () => process.env.TEST_REDIS_TARGET === 'cluster';

/** The Redis the tests' gateways use by default: the single test Redis, or the cluster in the `cluster` project. */
export const testRedisTarget = (): RedisTarget => (onCluster() ? testCluster() : process.env.TEST_REDIS_URL!);

/**
 * Relays in front of a Redis (one TcpProxy) or of every node of a cluster (one per node, found by
 * CLUSTER NODES, and a natMap sending the cluster client's connections through them): `target`
 * reaches Redis only through them, so `cut`, `restore` and `replyDelayMs` act on all of it.
 */
export interface RedisRelay {
  target: RedisTarget;
  set replyDelayMs(ms: number);
  /** What each proxy does with what the client sends, and after each reply (TcpProxy's). */
  set tamper(tamper: TcpProxy['tamper']);
  set afterReply(afterReply: TcpProxy['afterReply']);
  /** The client connections open through its proxies now. */
  readonly clients: number;
  cut(): Promise<void>;
  restore(): Promise<void>;
}

async function clusterNodeAddresses(target: ClusterTarget): Promise<NodeAddress[]> {
  const seed = target.nodes[0]!;
  const admin = new Redis({ ...seed, lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    const lines = String(await admin.call('CLUSTER', 'NODES')).trim().split('\n');
    return lines.map((line) => {
      const address = line.split(' ')[1]!.split('@')[0]!;
      return { host: address.slice(0, address.lastIndexOf(':')), port: Number(address.slice(address.lastIndexOf(':') + 1)) };
    });
  } finally {
    admin.disconnect();
  }
}

export async function relayRedis(target: RedisTarget = testRedisTarget()): Promise<RedisRelay> {
  let proxies: TcpProxy[];
  let relayed: RedisTarget;
  if (typeof target === 'string') {
    const url = new URL(target);
    const proxy = await new TcpProxy({ host: url.hostname, port: Number(url.port || 6379) }).start();
    proxies = [proxy];
    relayed = proxy.rewrite(target);
  } else {
    const addresses = await clusterNodeAddresses(target);
    proxies = await Promise.all(addresses.map((address) => new TcpProxy(address).start()));
    const natMap = Object.fromEntries(addresses.map((address, i) => [`${address.host}:${address.port}`, { host: '127.0.0.1', port: proxies[i]!.port }]));
    relayed = { ...target, nodes: proxies.map((proxy) => ({ host: '127.0.0.1', port: proxy.port })), natMap };
  }
  return {
    target: relayed,
    set replyDelayMs(ms: number) {
      for (const proxy of proxies) proxy.replyDelayMs = ms;
    },
    set tamper(tamper: TcpProxy['tamper']) {
      for (const proxy of proxies) proxy.tamper = tamper;
    },
    set afterReply(afterReply: TcpProxy['afterReply']) {
      for (const proxy of proxies) proxy.afterReply = afterReply;
    },
    get clients() {
      return proxies.reduce((sum, proxy) => sum + proxy.clients, 0);
    },
    cut: async () => {
      await Promise.all(proxies.map((proxy) => proxy.cut()));
    },
    restore: async () => {
      await Promise.all(proxies.map((proxy) => proxy.restore()));
    },
  };
}
