/**
 * Preloaded (`node --import ./bench/allocation-sampler.mjs …`) into the servers
 * `npm run bench:breakdown -- --allocations` measures: V8's sampling heap profiler, started and
 * stopped over the IPC channel around each measured run, counting the objects collected since
 * (young and old) as well as those still alive, so that its profile estimates every byte the
 * process allocated in the run, by the function that allocated it. Plain JavaScript, as the GC
 * meter is (bench/gc-meter.mjs). Measurement only: off between runs.
 */
import { Session } from 'node:inspector';

const session = new Session();
session.connect();

/** @param {string} method @param {object} [params] */
const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));

if (process.send) {
  process.on('message', (message) => {
    // The question to start carries the bytes between samples, on average.
    if (typeof message === 'object' && message !== null && 'startAllocations' in message) {
      post('HeapProfiler.startSampling', { samplingInterval: message.startAllocations, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true }).then(
        () => process.send({ allocations: 'started' }),
        (error) => process.send({ allocations: { error: String(error) } }),
      );
    } else if (message === 'allocations-stop') {
      post('HeapProfiler.stopSampling').then(
        ({ profile }) => process.send({ allocations: profile }),
        (error) => process.send({ allocations: { error: String(error) } }),
      );
    }
  });
  // The channel must not keep a process alive that is shutting down.
  process.channel?.unref();
}
