/**
 * Preloaded (`node --import ./bench/gc-meter.mjs …`, after the process's own node options) into
 * every Node process `npm run bench` measures: it sums the time the process spends collecting
 * garbage, as Node reports it (a `gc` performance entry per collection, its duration the pause of
 * the main thread), and answers the bench over the IPC channel with the collections so far and
 * their total time, which the bench reads before and after each measured run as it reads the
 * process's CPU time. Measurement only: it runs once per collection, never per request, and keeps
 * two numbers, nothing that grows. Plain JavaScript: a .ts preload would load Node's type
 * stripper into every measured process, memory the gateway (built .js) never has.
 */
import { PerformanceObserver } from 'node:perf_hooks';

let count = 0;
let ms = 0;

/** @param {import('node:perf_hooks').PerformanceEntry[]} entries */
function add(entries) {
  for (const entry of entries) {
    count += 1;
    ms += entry.duration;
  }
}

const observer = new PerformanceObserver((list) => add(list.getEntries()));
observer.observe({ entryTypes: ['gc'] });

if (process.send) {
  process.on('message', (message) => {
    if (message !== 'gc-time?') return;
    // A collection's entry reaches the observer from an immediate queued after it: the answer
    // waits for those queued so far and takes what they left undelivered (not delivered twice).
    setImmediate(() => {
      add(observer.takeRecords());
      process.send({ gcTime: { count, ms } });
    });
  });
  // The channel must not keep a process alive that is shutting down.
  process.channel?.unref();
}
