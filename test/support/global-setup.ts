import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findOneOf } from '../../scripts/setup/machine.ts';
import { MissingNeeds, needNamed } from '../../scripts/setup/provision.ts';
import { freePort, startPrivateMysql, startPrivateRedis } from '../../scripts/setup/servers.ts';
import { startRedisCluster } from './redis-cluster-server.ts';

/**
 * Where the tests get MySQL and Redis, in this order: TEST_MYSQL_URL / TEST_REDIS_URL when set;
 * servers of the run's own from the installed binaries (mariadbd or mysqld, redis-server), their
 * data in a temporary folder removed at the end, on ports the kernel picks; containers (mysql:8.4,
 * redis:7) when no MySQL binary is installed and a Docker engine runs. TEST_SERVERS=containers
 * takes containers or stops. `npm test` installs the binaries first where it can
 * (scripts/setup/cli.ts); docs/testing.md tells the whole story.
 */
export interface TestServers {
  mysqlUrl: string;
  redisUrl: string;
  stop(): Promise<void>;
}

const MYSQL_IMAGE = 'mysql:8.4';
const REDIS_IMAGE = 'redis:7';

/** Why no Docker API engine can be used, or undefined when one answers. */
async function containerEngineProblem(): Promise<string | undefined> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** One line per server saying where it runs; passwords left out. */
function announce(name: string, url: string, where: string): void {
  const shown = new URL(url);
  if (shown.password) shown.password = '***';
  process.stdout.write(`\ntest servers: ${name} at ${shown.toString()} (${where})`);
}

interface Stoppable {
  stop(): Promise<unknown>;
}

/**
 * Both, once both have settled; when either fails, the other is stopped if it started and the
 * failure thrown: jest runs no global teardown after a global setup that failed.
 */
async function bothOrNeither<A extends Stoppable | undefined, B extends Stoppable | undefined>(a: Promise<A> | A, b: Promise<B> | B): Promise<[A, B]> {
  const [first, second] = await Promise.allSettled([a, b]);
  if (first.status === 'fulfilled' && second.status === 'fulfilled') return [first.value, second.value];
  await Promise.allSettled([first, second].map((result) => (result.status === 'fulfilled' ? result.value?.stop() : undefined)));
  throw first.status === 'rejected' ? first.reason : (second as PromiseRejectedResult).reason;
}

/** Containers for whichever of MySQL and Redis `env` names no URL for. */
async function startContainers(env: NodeJS.ProcessEnv): Promise<TestServers> {
  const { MySqlContainer } = await import('@testcontainers/mysql');
  const { RedisContainer } = await import('@testcontainers/redis');
  const [mysql, redis] = await bothOrNeither(
    env.TEST_MYSQL_URL ? undefined : new MySqlContainer(MYSQL_IMAGE).withRootPassword('test').start(),
    env.TEST_REDIS_URL ? undefined : new RedisContainer(REDIS_IMAGE).start(),
  );
  const mysqlUrl = mysql ? `mysql://root:test@${mysql.getHost()}:${mysql.getPort()}` : env.TEST_MYSQL_URL!;
  const redisUrl = redis ? redis.getConnectionUrl() : env.TEST_REDIS_URL!;
  announce('MySQL', mysqlUrl, mysql ? `container ${mysql.getId().slice(0, 12)} of ${MYSQL_IMAGE}` : 'TEST_MYSQL_URL');
  announce('Redis', redisUrl, redis ? `container ${redis.getId().slice(0, 12)} of ${REDIS_IMAGE}` : 'TEST_REDIS_URL');
  return {
    mysqlUrl,
    redisUrl,
    stop: async () => {
      await Promise.all([mysql?.stop(), redis?.stop()]);
    },
  };
}

/** This run's own servers, from the installed binaries, for whichever of the two `env` names no URL for. */
async function privateServers(env: NodeJS.ProcessEnv): Promise<TestServers> {
  const dir = mkdtempSync(path.join(tmpdir(), 'rest-microservices-test-'));
  const [mysql, redis] = await bothOrNeither(
    env.TEST_MYSQL_URL ? undefined : freePort().then((port) => startPrivateMysql(path.join(dir, 'mysql'), port)),
    env.TEST_REDIS_URL ? undefined : freePort().then((port) => startPrivateRedis(path.join(dir, 'redis'), port)),
  ).catch((error: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  });
  const mysqlUrl = mysql?.url ?? env.TEST_MYSQL_URL!;
  const redisUrl = redis?.url ?? env.TEST_REDIS_URL!;
  announce('MySQL', mysqlUrl, mysql ? `this run's ${mysql.where}` : 'TEST_MYSQL_URL');
  announce('Redis', redisUrl, redis ? `this run's ${redis.where}` : 'TEST_REDIS_URL');
  return {
    mysqlUrl,
    redisUrl,
    stop: async () => {
      await Promise.all([mysql?.stop(), redis?.stop()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** TEST_SERVERS=containers: both servers in containers, or a stop saying why not. */
async function requiredContainers(env: NodeJS.ProcessEnv): Promise<TestServers> {
  const named = ['TEST_MYSQL_URL', 'TEST_REDIS_URL'].filter((name) => env[name]);
  if (named.length > 0) throw new Error(`TEST_SERVERS=containers starts both servers in containers: unset ${named.join(' and ')}.`);
  const problem = await containerEngineProblem();
  if (problem) throw new Error(`TEST_SERVERS=containers, and no Docker API engine answers: ${problem}`);
  return startContainers(env);
}

async function resolveTestServers(env: NodeJS.ProcessEnv = process.env): Promise<TestServers> {
  if (env.TEST_SERVERS !== undefined && env.TEST_SERVERS !== 'containers') {
    throw new Error(`TEST_SERVERS is "${env.TEST_SERVERS}": leave it unset, or set it to "containers".`);
  }
  if (env.TEST_SERVERS === 'containers') return requiredContainers(env);
  if (env.TEST_MYSQL_URL && env.TEST_REDIS_URL) {
    announce('MySQL', env.TEST_MYSQL_URL, 'TEST_MYSQL_URL');
    announce('Redis', env.TEST_REDIS_URL, 'TEST_REDIS_URL');
    return { mysqlUrl: env.TEST_MYSQL_URL, redisUrl: env.TEST_REDIS_URL, stop: async () => undefined };
  }
  if (findOneOf(['mariadbd', 'mysqld'])) return privateServers(env);
  if ((await containerEngineProblem()) === undefined) return startContainers(env);
  throw new MissingNeeds('npm test', [needNamed('MySQL or MariaDB')]);
}

/**
 * The Redis Cluster the `Redis Cluster` project's suites and the failover test use:
 * TEST_REDIS_CLUSTER_NODES when set, else six local redis-server nodes started here.
 */
async function resolveTestCluster(env: NodeJS.ProcessEnv = process.env): Promise<{ nodes: string; dir?: string; stop(): Promise<void> }> {
  if (env.TEST_REDIS_CLUSTER_NODES) {
    process.stdout.write(`\ntest servers: Redis Cluster at ${env.TEST_REDIS_CLUSTER_NODES} (TEST_REDIS_CLUSTER_NODES)`);
    return { nodes: env.TEST_REDIS_CLUSTER_NODES, stop: async () => undefined };
  }
  const started = Date.now();
  const cluster = await startRedisCluster();
  process.stdout.write(`\ntest servers: Redis Cluster at ${cluster.nodes} (started here in ${Date.now() - started} ms)`);
  return cluster;
}

/** Resolves the servers once per run; workers inherit them through the environment. */
export default async function globalSetup(): Promise<void> {
  const [servers, cluster] = await bothOrNeither(resolveTestServers(), resolveTestCluster());
  process.stdout.write('\n');
  process.env.TEST_MYSQL_URL = servers.mysqlUrl;
  process.env.TEST_REDIS_URL = servers.redisUrl;
  process.env.TEST_REDIS_CLUSTER_NODES = cluster.nodes;
  if (cluster.dir) process.env.TEST_REDIS_CLUSTER_DIR = cluster.dir;
  // This run's gateways keep their Redis keys apart from any other run's on the same Redis.
  process.env.TEST_REDIS_KEY_PREFIX = `test-${process.pid}-${Date.now().toString(36)}:`;
  (globalThis as { testServers?: TestServers }).testServers = { ...servers, stop: async () => void (await Promise.all([servers.stop(), cluster.stop()])) };
}
