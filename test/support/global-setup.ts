import net from 'node:net';

/**
 * Where the tests get MySQL and Redis, in this order: TEST_MYSQL_URL / TEST_REDIS_URL when set;
 * containers (mysql:8.4, redis:7) when a Docker engine runs; the local defaults when they answer;
 * otherwise a message saying what to provide.
 */
export interface TestServers {
  mysqlUrl: string;
  redisUrl: string;
  stop(): Promise<void>;
}

const LOCAL_MYSQL = 'mysql://root@127.0.0.1:3306';
const LOCAL_REDIS = 'redis://127.0.0.1:6379';

function answers(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise<boolean>((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port), timeout: 1_000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

async function dockerRuns(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

async function resolveTestServers(env: NodeJS.ProcessEnv = process.env): Promise<TestServers> {
  if (env.TEST_MYSQL_URL && env.TEST_REDIS_URL) {
    return { mysqlUrl: env.TEST_MYSQL_URL, redisUrl: env.TEST_REDIS_URL, stop: async () => undefined };
  }
  if (await dockerRuns()) {
    const { MySqlContainer } = await import('@testcontainers/mysql');
    const { RedisContainer } = await import('@testcontainers/redis');
    const [mysql, redis] = await Promise.all([
      env.TEST_MYSQL_URL ? undefined : new MySqlContainer('mysql:8.4').withRootPassword('test').start(),
      env.TEST_REDIS_URL ? undefined : new RedisContainer('redis:7').start(),
    ]);
    return {
      mysqlUrl: env.TEST_MYSQL_URL ?? `mysql://root:test@${mysql!.getHost()}:${mysql!.getPort()}`,
      redisUrl: env.TEST_REDIS_URL ?? redis!.getConnectionUrl(),
      stop: async () => {
        await Promise.all([mysql?.stop(), redis?.stop()]);
      },
    };
  }
  const mysqlUrl = env.TEST_MYSQL_URL ?? LOCAL_MYSQL;
  const redisUrl = env.TEST_REDIS_URL ?? LOCAL_REDIS;
  const missing = [
    ...((await answers(mysqlUrl)) ? [] : [`MySQL (tried ${mysqlUrl}): set TEST_MYSQL_URL=mysql://user:password@host:port`]),
    ...((await answers(redisUrl)) ? [] : [`Redis (tried ${redisUrl}): set TEST_REDIS_URL=redis://host:port`]),
  ];
  if (missing.length > 0) {
    throw new Error(
      `The tests need MySQL and Redis, and found no Docker engine to start them in containers.\n` +
        missing.map((m) => `  - ${m}`).join('\n') +
        `\nOr start them locally on 127.0.0.1:3306 (user root, no password) and 127.0.0.1:6379.`,
    );
  }
  return { mysqlUrl, redisUrl, stop: async () => undefined };
}

/** Resolves the servers once per run; workers inherit them through the environment. */
export default async function globalSetup(): Promise<void> {
  const servers = await resolveTestServers();
  process.env.TEST_MYSQL_URL = servers.mysqlUrl;
  process.env.TEST_REDIS_URL = servers.redisUrl;
  // This run's gateways keep their Redis keys apart from any other run's on the same Redis.
  process.env.TEST_REDIS_KEY_PREFIX = `test-${process.pid}-${Date.now().toString(36)}:`;
  (globalThis as { testServers?: TestServers }).testServers = servers;
}
