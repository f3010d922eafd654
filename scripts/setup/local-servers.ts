import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { findOneOf, findProgram, LOCAL_DIR } from './machine.ts';
import { needNamed, provide } from './provision.ts';
import { answers, freePort, mysqlAccepts, redisAnswersPing, startPrivateMysql, startPrivateRedis, type PrivateServer } from './servers.ts';

/**
 * The MySQL and Redis `npm start` runs against: those configured when they answer, else its own,
 * in this order: private servers from the installed binaries (data under .local/); containers
 * of mysql:8.4 and redis:7 through docker or podman, when one has the image or can pull it; as
 * root on Debian or Ubuntu, the packages installed (said first), then private servers; otherwise a
 * stop naming the command that installs them.
 */
export interface StartServers {
  /** The base URL the services' DATABASE_URL is made from, when it is not their default. */
  mysqlUrl?: string;
  /** The gateway's REDIS_URL, when it is not its default. */
  redisUrl?: string;
  /** One line per server: where it runs. */
  where: string[];
  stop(): Promise<void>;
}

const CONFIGURED_MYSQL = 'mysql://root@127.0.0.1:3306';
const CONFIGURED_REDIS_PORT = 6379;
const OWN_PORTS = { mysql: 13306, redis: 16379 };
const IMAGES = { mysql: 'mysql:8.4', redis: 'redis:7' };

type Kind = keyof typeof OWN_PORTS;

/** Why we bring our own `kind`, or undefined when the configured one will do. */
async function reasonToBring(kind: Kind, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (kind === 'mysql') {
    if (env.DATABASE_URL) return undefined;
    if (await mysqlAccepts(CONFIGURED_MYSQL)) return undefined;
    return (await answers(3306)) ? '127.0.0.1:3306 answers but does not let root in without a password' : 'nothing answers on 127.0.0.1:3306';
  }
  if (env.REDIS_URL || env.REDIS_CLUSTER_NODES) return undefined;
  if (await redisAnswersPing(CONFIGURED_REDIS_PORT)) return undefined;
  return (await answers(CONFIGURED_REDIS_PORT)) ? '127.0.0.1:6379 answers but not to PING' : 'nothing answers on 127.0.0.1:6379';
}

const hasBinaries = (kind: Kind) => Boolean(kind === 'mysql' ? findOneOf(['mariadbd', 'mysqld']) : findProgram('redis-server'));

/** docker or podman, when it runs containers and has (or can pull) every image of `kinds`. */
function containerCli(kinds: Kind[]): string | undefined {
  for (const cli of ['docker', 'podman']) {
    if (!findProgram(cli) || spawnSync(cli, ['info'], { stdio: 'ignore', timeout: 5_000 }).status !== 0) continue;
    const hasImage = (image: string) =>
      spawnSync(cli, ['image', 'inspect', image], { stdio: 'ignore' }).status === 0 || spawnSync(cli, ['pull', '-q', image], { stdio: 'ignore', timeout: 300_000 }).status === 0;
    if (kinds.every((kind) => hasImage(IMAGES[kind]))) return cli;
  }
  return undefined;
}

async function startContainer(cli: string, kind: Kind, port: number): Promise<PrivateServer> {
  const [inner, env] = kind === 'mysql' ? [3306, ['-e', 'MYSQL_ALLOW_EMPTY_PASSWORD=yes']] : [6379, []];
  const run = spawnSync(cli, ['run', '-d', '--rm', '-p', `127.0.0.1:${port}:${inner}`, ...env, IMAGES[kind]], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`${cli} run ${IMAGES[kind]} failed: ${run.stderr}`);
  const id = run.stdout.trim();
  const stop = async () => void spawnSync(cli, ['rm', '-f', id], { stdio: 'ignore' });
  const url = kind === 'mysql' ? `mysql://root@127.0.0.1:${port}` : `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  while (!(kind === 'mysql' ? await mysqlAccepts(url) : await redisAnswersPing(port))) {
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the ${IMAGES[kind]} container was not ready after 120 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return { url, where: `${cli} container ${id.slice(0, 12)} of ${IMAGES[kind]}`, stop };
}

/** Our own port for `kind`, or one the kernel picks when another program has it. */
const portFor = async (kind: Kind) => ((await answers(OWN_PORTS[kind])) ? freePort() : OWN_PORTS[kind]);

function startPrivate(kind: Kind, port: number): Promise<PrivateServer> {
  const dataDir = path.join(LOCAL_DIR, kind);
  return kind === 'mysql' ? startPrivateMysql(dataDir, port) : startPrivateRedis(dataDir, port);
}

/** Brings what `env` does not configure, saying why; stops what it started if any part fails. */
export async function bringStartServers(env: NodeJS.ProcessEnv, say: (line: string) => void): Promise<StartServers> {
  const reasons = { mysql: await reasonToBring('mysql', env), redis: await reasonToBring('redis', env) };
  const kinds = (Object.keys(reasons) as Kind[]).filter((kind) => reasons[kind] !== undefined);
  for (const kind of kinds) say(`${reasons[kind]}: running the project's own ${kind === 'mysql' ? 'MySQL' : 'Redis'}`);
  const withoutBinaries = kinds.filter((kind) => !hasBinaries(kind));
  const cli = withoutBinaries.length > 0 ? containerCli(withoutBinaries) : undefined;
  if (withoutBinaries.length > 0 && !cli) provide(withoutBinaries.map((kind) => needNamed(kind === 'mysql' ? 'MySQL or MariaDB' : 'Redis')), 'npm start', say);
  const started: PrivateServer[] = [];
  const servers: Partial<Record<Kind, PrivateServer>> = {};
  try {
    for (const kind of kinds) {
      const port = await portFor(kind);
      servers[kind] = cli && withoutBinaries.includes(kind) ? await startContainer(cli, kind, port) : await startPrivate(kind, port);
      started.push(servers[kind]);
    }
  } catch (error) {
    await Promise.all(started.map((server) => server.stop()));
    throw error;
  }
  const where = [
    `MySQL: ${servers.mysql ? `${servers.mysql.url} (${servers.mysql.where})` : (env.DATABASE_URL ?? CONFIGURED_MYSQL)}`,
    `Redis: ${servers.redis ? `${servers.redis.url} (${servers.redis.where})` : (env.REDIS_URL ?? env.REDIS_CLUSTER_NODES ?? `redis://127.0.0.1:${CONFIGURED_REDIS_PORT}`)}`,
  ];
  return { mysqlUrl: servers.mysql?.url, redisUrl: servers.redis?.url, where, stop: async () => void (await Promise.all(started.map((server) => server.stop()))) };
}
