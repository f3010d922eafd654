import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readServiceList } from '@app/shared/platform/services';
import { closedPort } from './tcp-proxy.ts';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface RunningProcess {
  child: ChildProcess;
  /** Parsed JSON log lines so far. */
  lines: Record<string, unknown>[];
  /** The other lines of its output so far: what a script says to its user. */
  said: string[];
  stderr: () => string;
  /** Resolves with the first log line `matches` accepts (now or later). */
  logged(matches: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs `command` (a workspace's built entry point, or npm) in `cwd` with `env` added to a minimal environment. */
export function run(command: string, args: string[], env: Record<string, string>, cwd = ROOT, options: { ownGroup?: boolean } = {}): RunningProcess {
  const child = spawn(command, args, {
    cwd,
    // A process group of its own, which a test signals as a terminal's Ctrl-C does: process.kill(-pid).
    detached: options.ownGroup === true,
    // A gateway keeps its Redis keys under this test run's prefix, as the in-process ones do, and
    // serves its metrics on a free port (the default one would be taken by the gateway beside it).
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info', REDIS_KEY_PREFIX: process.env.TEST_REDIS_KEY_PREFIX ?? '', METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  const said: string[] = [];
  const waiters: { matches: (line: Record<string, unknown>) => boolean; resolve: (line: Record<string, unknown>) => void }[] = [];
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    let newline: number;
    while ((newline = stdout.indexOf('\n')) >= 0) {
      // A line `npm start` (concurrently) prefixed with its command's name: `[users] {...}`.
      const text = stdout.slice(0, newline).replace(/^\[[\w-]+\] /, '');
      stdout = stdout.slice(newline + 1);
      if (!text.startsWith('{')) {
        said.push(text);
        continue;
      }
      const line = JSON.parse(text) as Record<string, unknown>;
      lines.push(line);
      for (const waiter of waiters.filter((w) => w.matches(line))) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // 'close', not 'exit': it waits for the output of any grandchild (npm runs the process in a shell).
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    lines,
    said,
    stderr: () => stderr,
    exited,
    logged: (matches) => {
      const seen = lines.find(matches);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ matches, resolve });
        void exited.then(({ code }) => reject(new Error(`process exited (${code}) before logging the expected line; stderr: ${stderr}`)));
      });
    },
  };
}

/**
 * The node options a workspace's entry point runs with: those of its start script
 * (`exec node <options> dist/main.js`, as its Dockerfile's CMD), so it runs as deployed.
 */
export function deployedNodeOptions(workspace: string): string[] {
  const { scripts } = JSON.parse(readFileSync(path.join(ROOT, workspace, 'package.json'), 'utf8')) as { scripts: { start: string } };
  const options = /^exec node (.*)dist\/main\.js$/.exec(scripts.start)?.[1];
  if (options === undefined) throw new Error(`${workspace}'s start script is not \`exec node … dist/main.js\`: ${scripts.start}`);
  return options.split(' ').filter(Boolean);
}

/** Starts a workspace's built `dist/main.js` on a free port (with `nodeOptions`); resolves once it listens. */
export async function startWorkspace(workspace: string, env: Record<string, string>, nodeOptions: string[] = []) {
  const started = run(process.execPath, [...nodeOptions, `${workspace}/dist/main.js`], { PORT: '0', ...env });
  const listening = await started.logged((line) => typeof line.msg === 'string' && line.msg.endsWith('listening'));
  const metricsPort = listening.metricsPort as number | undefined;
  return {
    ...started,
    port: listening.port as number,
    url: `http://127.0.0.1:${listening.port as number}`,
    /** Its metrics port, where it serves GET /metrics. */
    metricsUrl: metricsPort === undefined ? undefined : `http://127.0.0.1:${metricsPort}`,
  };
}

/** The next message of `child` (over its IPC channel) that has `key`: its value. */
export function nextMessage<T>(child: ChildProcess, key: string): Promise<T> {
  return new Promise((resolve) => {
    const listener = (message: unknown) => {
      if (typeof message !== 'object' || message === null || !(key in message)) return;
      child.off('message', listener);
      resolve((message as Record<string, T>)[key]!);
    };
    child.on('message', listener);
  });
}

/** A services file listing only users, on a free port: `npm start` runs it and the gateway, and nothing else. */
export async function usersOnlyServicesFile(): Promise<string> {
  const [users] = readServiceList().filter(({ name }) => name === 'users');
  const file = path.join(await mkdtemp(path.join(os.tmpdir(), 'services-')), 'services.json');
  const { name, cachedReads, publicReads, owner } = users!;
  await writeFile(file, JSON.stringify({ services: [{ name, port: await closedPort(), cachedReads, publicReads, owner }] }));
  return file;
}
