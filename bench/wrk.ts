/**
 * wrk, the load generator every bench drives: started on the load generator's core, its
 * `--latency` summary read into figures.
 */
import { spawn } from 'node:child_process';
import { median, pinned, pinning } from './support.ts';

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  /** Responses with a status of 400 or more (wrk counts them as "Non-2xx or 3xx"). */
  non2xx: number;
  /** Connect, read, write and timeout errors. */
  socketErrors: number;
}

function toMs(value: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(value);
  if (!match) throw new Error(`cannot read wrk latency "${value}"`);
  const factor = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[match[2] as 'us' | 'ms' | 's' | 'm'];
  return Math.round(Number(match[1]) * factor * 1000) / 1000;
}

/** Reads the figures of `wrk --latency` output. */
export function parseWrk(output: string): LoadResult {
  if (!/Requests\/sec:/.test(output)) throw new Error(`wrk printed no summary:\n${output}`);
  const number = (pattern: RegExp) => Number(pattern.exec(output)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  return {
    requestsPerSecond: Math.round(number(/Requests\/sec:\s+([\d.]+)/)),
    p50Ms: toMs(/\s50%\s+(\S+)/.exec(output)?.[1] ?? 'NaNms'),
    p99Ms: toMs(/\s99%\s+(\S+)/.exec(output)?.[1] ?? 'NaNms'),
    requests: number(/(\d+) requests in/),
    non2xx: number(/Non-2xx or 3xx responses: (\d+)/),
    socketErrors: socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
  };
}

/**
 * Starts wrk with `args` on `core` (the load generator's by default): its pid, to sample it while it
 * runs, and its output once it has exited 0.
 */
export function spawnWrk(args: string[], core: string | undefined = pinning?.load): { pid: number | undefined; output: Promise<string> } {
  const [file, argv] = pinned(core, 'wrk', args);
  const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  let text = '';
  child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const output = new Promise<string>((resolve, reject) => {
    child.once('error', reject);
    // 'close', not 'exit': 'exit' may come before the last of wrk's output, all written at its end,
    // has been read from the pipe.
    child.once('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited with ${code}:\n${text}`))));
  });
  return { pid: child.pid, output };
}

/** One wrk run against `url`, on the load generator's core. */
export async function wrk(url: string, options: { seconds: number; connections: number; headers?: Record<string, string>; script?: string; scriptArgs?: string[] }): Promise<LoadResult> {
  const args = ['-t1', `-c${options.connections}`, `-d${options.seconds}s`, '--latency', '--timeout', '5s'];
  for (const [name, value] of Object.entries(options.headers ?? {})) args.push('-H', `${name}: ${value}`);
  if (options.script) args.push('-s', options.script);
  args.push(url);
  if (options.scriptArgs) args.push('--', ...options.scriptArgs);
  return parseWrk(await spawnWrk(args).output);
}

/** Several runs' figures as one: the median run's rate and latencies, the counts summed. */
export function combinedRuns(runs: LoadResult[]): LoadResult {
  return {
    requestsPerSecond: median(runs.map((r) => r.requestsPerSecond)),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
    requests: runs.reduce((sum, r) => sum + r.requests, 0),
    non2xx: runs.reduce((sum, r) => sum + r.non2xx, 0),
    socketErrors: runs.reduce((sum, r) => sum + r.socketErrors, 0),
  };
}
