/**
 * Preloaded (`node --import ./bench/loop-probe.ts …`) into every process `npm run load` starts: it
 * measures the process's event-loop delay and answers the load script over the IPC channel with
 * the p50, p99 and max since its last answer (ms). Measurement only: nothing in the servers changes.
 *
 * Its own timer rather than monitorEventLoopDelay: the script asks between steps, and under load
 * the question is read during a long poll phase (IPC is I/O: it is read while timers wait). The
 * built-in histogram, reset then, drops the whole delay in progress (its first tick after a reset
 * records nothing), so a multi-second delay at a step's start could vanish from both steps. Here
 * the delay so far goes to the step that ends, the rest to the one that starts.
 */
import { createHistogram } from 'node:perf_hooks';

const RESOLUTION_MS = 10;
const delays = createHistogram();
let last = performance.now();
let max = 0;

/** Records the delay since the last tick (or ask), beyond the timer's own period. */
function record(now: number): void {
  const delayMs = Math.max(0, now - last - RESOLUTION_MS);
  // The histogram takes integers: microseconds.
  delays.record(Math.max(1, Math.round(delayMs * 1000)));
  max = Math.max(max, delayMs);
  last = now;
}

setInterval(() => record(performance.now()), RESOLUTION_MS).unref();

if (process.send) {
  process.on('message', (message) => {
    if (message !== 'event-loop-delay?') return;
    record(performance.now());
    const ms = (micros: number) => Math.round(micros / 10) / 100;
    process.send!({ p50Ms: ms(delays.percentile(50)), p99Ms: ms(delays.percentile(99)), maxMs: Math.round(max * 100) / 100 });
    delays.reset();
    max = 0;
  });
  // The channel must not keep a process alive that is shutting down.
  process.channel?.unref();
}
