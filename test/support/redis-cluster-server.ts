import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * The test Redis Cluster (imported by the global setup, which Node loads without jest's module
 * mapping: no imports of the project's modules here): six nodes of Debian's `redis-server` (three masters, a replica each) on
 * these ports, each with its cluster bus on port + 10000. A node is judged failed after
 * NODE_TIMEOUT_MS, so a killed master's replica takes over within a few seconds.
 */
const CLUSTER_PORTS = [7100, 7101, 7102, 7103, 7104, 7105];
const CLUSTER_ADDRESSES = CLUSTER_PORTS.map((port) => `127.0.0.1:${port}`);
const NODE_TIMEOUT_MS = 1_000;
/** The whole start (six processes, `--cluster create`, every node agreeing) takes at most this long. */
const START_WITHIN_MS = 30_000;

/** The arguments a node is started with, in `dir` (its nodes.conf there), again after it is killed. */
function nodeArguments(port: number, dir: string): string[] {
  return [
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
    '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', String(NODE_TIMEOUT_MS),
    // A replica takes over however long ago it last heard its master.
    '--cluster-replica-validity-factor', '0',
  ];
}

/** Starts (or starts again, after a SIGKILL) the node on `port`, its state in `dir`; detached, stopped by `stopRedisCluster`. */
export function startClusterNode(port: number, dir: string): ChildProcess {
  const child = spawn('redis-server', nodeArguments(port, dir), { stdio: 'ignore', detached: true });
  child.unref();
  return child;
}

const info = async (port: number, command: string[]): Promise<string> => (await run('redis-cli', ['-p', String(port), ...command], { timeout: 2_000 })).stdout;

/** Every node answers, says the cluster is ok, and agrees on three masters covering every slot. */
async function clusterSettled(): Promise<boolean> {
  try {
    for (const port of CLUSTER_PORTS) {
      const state = await info(port, ['cluster', 'info']);
      if (!/cluster_state:ok/.test(state) || !/cluster_slots_ok:16384/.test(state) || !new RegExp(`cluster_known_nodes:${CLUSTER_PORTS.length}\\b`).test(state)) return false;
      const nodes = (await info(port, ['cluster', 'nodes'])).split('\n').filter((line) => line !== '' && !/\bfail/.test(line));
      const masters = nodes.filter((line) => /\bmaster\b/.test(line) && / \d+-\d+/.test(line));
      const replicas = nodes.filter((line) => /\bslave\b/.test(line));
      if (masters.length !== CLUSTER_PORTS.length / 2 || replicas.length !== CLUSTER_PORTS.length / 2) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** Waits until the cluster has settled (see `clusterSettled`), at most `withinMs`. */
export async function untilClusterSettled(withinMs = START_WITHIN_MS): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await clusterSettled())) {
    if (Date.now() > deadline) throw new Error(`the Redis Cluster on ports ${CLUSTER_PORTS.join(', ')} did not settle within ${withinMs} ms`);
    await sleep(100);
  }
}

/** Whether something answers on `port`. */
const answers = (port: number) => info(port, ['ping']).then((reply) => reply.trim() === 'PONG', () => false);

interface RunningCluster {
  nodes: string;
  dir: string;
  stop(): Promise<void>;
}

/**
 * A fresh 6-node cluster on CLUSTER_PORTS: started, created with `redis-cli --cluster create
 * --cluster-replicas 1`, settled; within START_WITHIN_MS or an error saying why.
 */
export async function startRedisCluster(): Promise<RunningCluster> {
  const busy = (await Promise.all(CLUSTER_PORTS.map(async (port) => ((await answers(port)) ? port : undefined)))).filter((port) => port !== undefined);
  if (busy.length > 0) throw new Error(`ports ${busy.join(', ')} are taken: the test Redis Cluster needs ${CLUSTER_PORTS.join(', ')} (and each + 10000) free`);
  const dir = mkdtempSync(path.join(tmpdir(), 'redis-cluster-'));
  const stop = () => stopRedisCluster(dir);
  const children: ChildProcess[] = [];
  try {
    for (const port of CLUSTER_PORTS) children.push(startClusterNode(port, dir));
    const deadline = Date.now() + START_WITHIN_MS;
    while (!(await Promise.all(CLUSTER_PORTS.map(answers))).every(Boolean)) {
      if (Date.now() > deadline) throw new Error('the Redis Cluster nodes did not start');
      await sleep(50);
    }
    await run('redis-cli', ['--cluster', 'create', ...CLUSTER_ADDRESSES, '--cluster-replicas', '1', '--cluster-yes'], { timeout: START_WITHIN_MS });
    await untilClusterSettled(Math.max(1_000, deadline - Date.now()));
  } catch (error) {
    // A node that never answered would miss the shutdown: each one started here is killed too.
    for (const child of children) child.kill('SIGKILL');
    await stop();
    throw error;
  }
  // The seed nodes as REDIS_CLUSTER_NODES names them.
  return { nodes: CLUSTER_ADDRESSES.join(','), dir, stop };
}

/** Shuts every node down (those started again after a kill too) and removes their state. */
async function stopRedisCluster(dir: string): Promise<void> {
  await Promise.all(CLUSTER_PORTS.map((port) => info(port, ['shutdown', 'nosave']).catch(() => undefined)));
  rmSync(dir, { recursive: true, force: true });
}

