import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findOneOf, findProgram, isRoot } from './machine.ts';

/** A server this process started, and the way to stop it. */
export interface PrivateServer {
  url: string;
  /** What to tell a user: the program and its data folder. */
  where: string;
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;

/** Whether something accepts TCP connections at `port` on 127.0.0.1 (or `host`). */
export function answers(port: number, host = '127.0.0.1', timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: timeoutMs });
    const done = (result: boolean) => {
      socket.destroy();
      resolve(result);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

/** A port nothing listens on now, from the kernel. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * `program` and its arguments, run so that it gets SIGTERM when its parent dies, where util-linux's
 * setpriv exists: a parent killed outright leaves nothing behind.
 */
export function dyingWithParent(program: string, args: string[]): [string, string[]] {
  const setpriv = process.platform === 'linux' ? findProgram('setpriv') : undefined;
  return setpriv ? [setpriv, ['--pdeathsig', 'TERM', '--', program, ...args]] : [program, args];
}

/**
 * Starts `program` in a process group of its own (a terminal's Ctrl-C reaches only its parent,
 * which stops it in order), dying with its parent.
 */
function startDetached(program: string, args: string[], logFile: string): ChildProcess {
  const [command, commandArgs] = dyingWithParent(program, args);
  const log = openSync(logFile, 'a');
  return spawn(command, commandArgs, { detached: true, stdio: ['ignore', log, log] });
}

function tail(file: string): string {
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').slice(-15).join('\n') : '(no log)';
}

/** Waits until `ready()` holds, failing at once when the child exits, and after READY_TIMEOUT_MS. */
async function waitReady(child: ChildProcess, name: string, logFile: string, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = `exited (${signal ?? code})`));
  while (!(await ready())) {
    if (exited || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${name} ${exited ?? `was not ready after ${READY_TIMEOUT_MS / 1000} s`}; the end of ${logFile}:\n${tail(logFile)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Stops `child` with SIGTERM, and SIGKILL if it is still there after `graceMs`. */
function stopChild(child: ChildProcess, graceMs = 30_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Whether the MySQL at `url` lets its user in: the one check that a server is ready for us. */
export async function mysqlAccepts(url: string): Promise<boolean> {
  const { default: mysql } = await import('mysql2/promise');
  try {
    const connection = await mysql.createConnection({ uri: url, connectTimeout: 1_000 });
    await connection.end();
    return true;
  } catch {
    return false;
  }
}

/** A unix socket path short enough for the kernel's 108 bytes, whatever the data folder's path. */
function socketPath(dataDir: string, name: string): string {
  return path.join(tmpdir(), `${name}-${createHash('sha256').update(dataDir).digest('hex').slice(0, 12)}.sock`);
}

/**
 * A MariaDB (or MySQL) of this project's own: its data in `dataDir` (created on first use, root
 * without a password, reachable from 127.0.0.1 only), listening on `port`.
 */
export async function startPrivateMysql(dataDir: string, port: number): Promise<PrivateServer> {
  const server = findOneOf(['mariadbd', 'mysqld']);
  if (!server) throw new Error('neither mariadbd nor mysqld is installed');
  const mariadb = path.basename(server) === 'mariadbd' || /MariaDB/i.test(spawnSync(server, ['--version'], { encoding: 'utf8' }).stdout ?? '');
  const asRoot = isRoot() ? ['--user=root'] : [];
  const logFile = path.join(dataDir, 'server.log');
  if (!existsSync(path.join(dataDir, 'mysql'))) {
    mkdirSync(dataDir, { recursive: true });
    // --force: without it mariadb-install-db refuses a machine whose hostname does not resolve (a
    // chroot with no /etc/hosts); the server is only reached on 127.0.0.1, which needs no lookup.
    const init = mariadb
      ? { program: findOneOf(['mariadb-install-db', 'mysql_install_db']), args: ['--no-defaults', '--force', `--datadir=${dataDir}`, '--auth-root-authentication-method=normal', '--skip-test-db', ...asRoot] }
      : { program: server, args: ['--no-defaults', '--initialize-insecure', `--datadir=${dataDir}`, ...asRoot] };
    if (!init.program) throw new Error('mariadb-install-db is not installed');
    const result = spawnSync(init.program, init.args, { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`${init.program} failed:\n${result.stdout}${result.stderr}`);
  }
  const args = [
    '--no-defaults',
    `--datadir=${dataDir}`,
    `--port=${port}`,
    '--bind-address=127.0.0.1',
    `--socket=${socketPath(dataDir, 'mysql')}`,
    `--pid-file=${path.join(dataDir, 'server.pid')}`,
    `--log-error=${logFile}`,
    ...(mariadb ? [] : ['--skip-log-bin', '--mysqlx=OFF']),
    ...asRoot,
  ];
  const child = startDetached(server, args, logFile);
  await waitReady(child, path.basename(server), logFile, () => mysqlAccepts(`mysql://root@127.0.0.1:${port}`));
  return { url: `mysql://root@127.0.0.1:${port}`, where: `${path.basename(server)}, data in ${dataDir}`, stop: () => stopChild(child) };
}

/** Whether a Redis answers PING at `port` (one that wants a password answers NOAUTH: not ours). */
export async function redisAnswersPing(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 1_000 });
    const done = (result: boolean) => {
      socket.destroy();
      resolve(result);
    };
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (reply) => done(reply.toString().startsWith('+PONG')));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

/** A redis-server of this project's own on `port`, keeping nothing on disk; `dataDir` holds its log. */
export async function startPrivateRedis(dataDir: string, port: number): Promise<PrivateServer> {
  const server = findProgram('redis-server');
  if (!server) throw new Error('redis-server is not installed');
  mkdirSync(dataDir, { recursive: true });
  const logFile = path.join(dataDir, 'server.log');
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dataDir, '--daemonize', 'no'];
  const child = startDetached(server, args, logFile);
  await waitReady(child, 'redis-server', logFile, () => redisAnswersPing(port));
  return { url: `redis://127.0.0.1:${port}`, where: `redis-server, nothing kept on disk`, stop: () => stopChild(child) };
}
