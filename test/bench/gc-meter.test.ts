/**
 * The bench's GC meter (bench/gc-meter.mjs), preloaded as `npm run bench` preloads it (GC_METER)
 * and read as the bench reads it (readGcMeter): its totals grow by every collection of its process
 * and that collection's time, including collections just before the question, and it keeps no
 * process alive.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { GC_METER, readGcMeter, type GcTime } from '../../bench/support.ts';
import { nextMessage as next, ROOT } from '../../tools/process.js';

const COLLECTIONS = 5;

/**
 * A process that, on 'collect', runs COLLECTIONS full collections and then answers with the
 * collections its own observer saw meanwhile; on 'collect, then ask', runs them and at once asks
 * its meter, as a question arriving right after them would.
 */
const COLLECTOR = `
const { PerformanceObserver } = require('node:perf_hooks');
const own = { count: 0, ms: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) { own.count += 1; own.ms += entry.duration; }
}).observe({ entryTypes: ['gc'] });
process.on('message', (message) => {
  if (message !== 'collect' && message !== 'collect, then ask') return;
  const before = { ...own };
  for (let i = 0; i < ${COLLECTIONS}; i++) globalThis.gc();
  if (message === 'collect, then ask') process.emit('message', 'gc-time?');
  else setTimeout(() => process.send({ collected: { count: own.count - before.count, ms: own.ms - before.ms } }), 50);
});
process.send({ ready: true });
// Alive until killed: the meter's channel keeps no process alive, the script's own listener neither.
setInterval(() => {}, 1000);
`;

const children: ChildProcess[] = [];

/**
 * `node <GC meter> args`, once its script has said it is ready (as the bench asks a server's meter
 * once it answers): a message sent before the preload listens would be lost.
 */
async function node(args: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...GC_METER, ...args], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(child);
  await next(child, 'ready');
  return child;
}

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

test('the totals grow by each collection and its time, read after read', async () => {
  const child = await node(['--expose-gc', '-e', COLLECTOR]);
  let last = await readGcMeter(child);
  for (let round = 0; round < 3; round++) {
    const collected = next<GcTime>(child, 'collected');
    child.send('collect');
    const own = await collected;
    const now = await readGcMeter(child);
    expect(own.count).toBeGreaterThanOrEqual(COLLECTIONS);
    // The meter may see a collection of its own between the two readings, never fewer than the process saw.
    expect(now.count - last.count).toBeGreaterThanOrEqual(own.count);
    expect(now.count - last.count).toBeLessThanOrEqual(own.count + 2);
    expect(now.ms - last.ms).toBeGreaterThanOrEqual(own.ms - 1e-6);
    if (now.count - last.count === own.count) expect(now.ms - last.ms).toBeCloseTo(own.ms, 6);
    last = now;
  }
});

test('a question right after collections counts them', async () => {
  const child = await node(['--expose-gc', '-e', COLLECTOR]);
  const before = await readGcMeter(child);
  const answer = next<GcTime>(child, 'gcTime');
  child.send('collect, then ask');
  expect((await answer).count - before.count).toBeGreaterThanOrEqual(COLLECTIONS);
});

test('the meter keeps no process alive', async () => {
  const child = await node(['-e', 'process.send({ ready: true }); setTimeout(() => {}, 200)']);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await readGcMeter(child);
  await expect(exited).resolves.toBe(0);
}, 10_000);
