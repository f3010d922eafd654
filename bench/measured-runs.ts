/**
 * Measured runs of `npm run bench` and its focused benches: a load against servers, with the CPU
 * and GC time the servers spent meanwhile.
 */
import { cpuMicros, settle, type Server } from './support.ts';

/** What a measured run gave: the load's result, and the server's CPU and GC time meanwhile (µs). */
export interface Measured<Result> {
  result: Result;
  cpuMicros: number;
  gcMicros: number | undefined;
}

/**
 * One measured run: once the servers' core is quiet (`settle`), `load` against `server`; what it
 * gave, the CPU time the server's processes spent meanwhile (µs), and, for a server with the GC
 * meter, the time its process spent collecting garbage meanwhile (µs; undefined without the
 * meter). The meter is asked outside the span whose CPU time is counted.
 */
export async function measuredRun<Result>(server: Server, load: () => Promise<Result>): Promise<Measured<Result>> {
  const [run] = await measuredAtOnce([{ server, load }]);
  return run!;
}

/**
 * Measured runs at the same time, once the servers' core is quiet: each server's load starts
 * together, and each server's CPU and GC time is read around all of them (as `measuredRun` does for
 * one). Servers sharing a core this way share whatever else the machine does meanwhile.
 */
export async function measuredAtOnce<Result>(runs: LoadedServer<Result>[]): Promise<Measured<Result>[]> {
  await settle();
  const gcBefore = await Promise.all(runs.map(({ server }) => server.gcTime?.()));
  const before = runs.map(({ server }) => cpuMicros(server.pids()));
  const results = await Promise.all(runs.map(({ load }) => load()));
  const cpu = runs.map(({ server }, i) => cpuMicros(server.pids()) - before[i]!);
  const gcAfter = await Promise.all(runs.map(({ server }) => server.gcTime?.()));
  return runs.map((_, i) => {
    const [gcB, gcA] = [gcBefore[i], gcAfter[i]];
    return { result: results[i]!, cpuMicros: cpu[i]!, gcMicros: gcB && gcA && (gcA.ms - gcB.ms) * 1000 };
  });
}

/** A server and the load a measured run puts on it. */
export interface LoadedServer<Result> {
  server: Server;
  load: () => Promise<Result>;
}

/**
 * The `run`-th of a pair's measured runs at once (`measuredAtOnce`), in the pair's order: which
 * load starts first alternates from run to run, so neither always has the head start.
 */
export async function measuredPairAtOnce<Result>(run: number, first: LoadedServer<Result>, second: LoadedServer<Result>): Promise<[Measured<Result>, Measured<Result>]> {
  const swapped = run % 2 === 1;
  const [a, b] = await measuredAtOnce(swapped ? [second, first] : [first, second]);
  return swapped ? [b!, a!] : [a!, b!];
}
