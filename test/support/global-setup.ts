import { resolveTestServers } from './servers.ts';

/** Resolves the servers once per run; workers inherit them through the environment. */
export default async function globalSetup(): Promise<void> {
  const servers = await resolveTestServers();
  process.env.TEST_MYSQL_URL = servers.mysqlUrl;
  process.env.TEST_REDIS_URL = servers.redisUrl;
  (globalThis as { testServers?: typeof servers }).testServers = servers;
}
