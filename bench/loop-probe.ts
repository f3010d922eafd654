/**
 * Preloaded (`node --import ./bench/loop-probe.ts …`) into every process `npm run load` starts: it
 * measures the process's event-loop delay and answers the load script over the IPC channel with
 * the p50, p99 and max since its last answer (ms). Measurement only: nothing in the servers changes.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';

const RESOLUTION_MS = 10;
const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
delay.enable();
// The histogram records the time between the probe's timer ticks: an idle loop reads RESOLUTION_MS.
const ms = (nanoseconds: number) => Math.max(0, Math.round(nanoseconds / 1e4 - RESOLUTION_MS * 100) / 100);

if (process.send) {
  process.on('message', (message) => {
    if (message !== 'event-loop-delay?') return;
    process.send!({ p50Ms: ms(delay.percentile(50)), p99Ms: ms(delay.percentile(99)), maxMs: ms(delay.max) });
    delay.reset();
  });
  // The channel must not keep a process alive that is shutting down.
  process.channel?.unref();
}
