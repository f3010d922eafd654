/**
 * What the load curve reads of the processes it runs, beside wrk's own figures: each one's
 * event-loop delay (bench/loop-probe.ts, over an IPC channel), memory and CPU time (/proc), the
 * gateway's accept queues (/proc/net/tcp) and its counters (/metrics).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readMetrics } from '../tools/metrics.ts';
import { cpuMicros, freePort, nodeOptionsFor, startServer, statusKiB, type Server } from './support.ts';

/** A process of the stack under load, started with the event-loop probe. */
export interface Probed extends Server {
  /** Where it serves GET /metrics (its METRICS_PORT). */
  metricsUrl: string;
}

/** Starts node `script` with the event-loop probe preloaded (answering over an IPC channel), on `core`. */
export async function startProbed(name: string, script: string, options: { env: Record<string, string>; nodeFlags?: string[]; core: string | undefined }): Promise<Probed> {
  const metricsPort = await freePort();
  const args = [...nodeOptionsFor(script), ...(options.nodeFlags ?? []), '--import', './bench/loop-probe.ts', script];
  const server = await startServer(name, process.execPath, args, {
    port: await freePort(),
    core: options.core,
    ipc: true,
    // Errors only: at thousands of requests a second, a warn line per shed request is load of its own.
    env: {
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: process.env.LOAD_LOG_LEVEL ?? 'error',
      ...(process.env.LISTEN_SOCKETS ? { LISTEN_SOCKETS: process.env.LISTEN_SOCKETS } : {}),
      ...options.env,
    },
  });
  return { ...server, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` };
}

export interface LoopDelay {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** The event-loop delay of `process` since the last ask. */
export function loopDelay({ child }: Probed): Promise<LoopDelay | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), 5_000);
    child.once('message', (message) => {
      clearTimeout(timer);
      resolve(message as LoopDelay);
    });
    child.send('event-loop-delay?');
  });
}

export interface Memory {
  rssMb: number;
  peakMb: number;
}

/** Current and peak resident memory of a process, in MB. */
export function memory(pid: number | undefined): Memory | undefined {
  const kib = pid === undefined ? undefined : statusKiB(pid, ['VmRSS', 'VmHWM']);
  return kib && { rssMb: Math.round(kib.VmRSS! / 1024), peakMb: Math.round(kib.VmHWM! / 1024) };
}

/**
 * Connections the kernel has completed but the process listening on `port` has not taken in yet:
 * the accept queues of its listening sockets (/proc/net/tcp's rx_queue of a socket in LISTEN, 0A).
 * Their clients have sent their requests and wait; nothing inside the process can see them.
 */
export function acceptQueue(port: number): number {
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let waiting = 0;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const [, address, , state, queues] = line.trim().split(/\s+/);
      if (state === '0A' && address?.endsWith(local)) waiting += parseInt(queues!.split(':')[1]!, 16);
    }
  }
  return waiting;
}

export function pidOf(program: string): number | undefined {
  try {
    return Number(execFileSync('pidof', ['-s', program], { encoding: 'utf8' }).trim()) || undefined;
  } catch {
    return undefined;
  }
}

/** The processes whose CPU time a step reports: the stack, the shared databases, and this script (the Redis proxy). */
export function cpuPids(processes: Probed[]): Record<string, number | undefined> {
  return {
    ...Object.fromEntries(processes.map((p) => [p.name, p.child.pid])),
    'mariadbd (shared)': pidOf('mariadbd'),
    'redis-server (shared)': pidOf('redis-server'),
    'load script (Redis proxy)': process.pid,
  };
}

export const cpuOf = (pids: Record<string, number | undefined>) => Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, pid === undefined ? 0 : cpuMicros([pid])]));

/** The memory of the stack, of wrk (as last sampled), of the load script, and of the shared databases. */
export const memoryOf = (processes: Probed[], wrk: Memory | undefined): Record<string, Memory | undefined> => ({
  ...Object.fromEntries(processes.map((p) => [p.name, memory(p.child.pid)])),
  wrk,
  'load script (Redis proxy)': memory(process.pid),
  'redis-server (shared)': memory(pidOf('redis-server')),
  'mariadbd (shared)': memory(pidOf('mariadbd')),
});

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Counters from the gateway's /metrics: cache outcomes, shed requests, and writes answered by status
 * (`writes 200`, `writes 503`, …): wrk's Lua cannot tell which request a response answers, the
 * gateway can.
 */
export async function gatewayCounters(gateway: Probed): Promise<Record<string, number>> {
  const metrics = readMetrics(await (await fetch(gateway.metricsUrl)).text());
  const counters: Record<string, number> = {};
  for (const { labels, value } of metrics.samples('gateway_cache_outcomes_total')) counters[labels.outcome!] = value;
  for (const { labels, value } of metrics.samples('gateway_shed_total')) counters[`shed ${labels.upstream} ${labels.kind}`] = value;
  for (const { labels, value } of metrics.samples('gateway_http_requests_total')) {
    if (!WRITE_METHODS.has(labels.method ?? '')) continue;
    const name = `writes ${labels.status}`;
    counters[name] = (counters[name] ?? 0) + value;
  }
  return counters;
}

/** What the gateway says of Redis: whether it is up, and the cache invalidations it owes. */
export async function redisState(gateway: Probed): Promise<{ redisUp: number; owed: number }> {
  const metrics = readMetrics(await (await fetch(gateway.metricsUrl)).text());
  const gauge = (name: string) => (metrics.has(name) ? metrics.value(name) : NaN);
  return { redisUp: gauge('gateway_redis_up'), owed: gauge('gateway_cache_owed_invalidations') };
}
