/**
 * The allocation sampler of `npm run bench:breakdown -- --allocations` (bench/allocation-sampler.mjs),
 * preloaded and asked as the breakdown does (ALLOCATION_SAMPLER, sampleAllocations): its profile
 * estimates the bytes a run allocated, garbage collected meanwhile included, by the function that
 * allocated them, and counts nothing allocated outside the run; it keeps no process alive.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { bytesByGroup, type AllocationNode } from '../../bench/breakdown.ts';
import { ALLOCATION_SAMPLER, sampleAllocations } from '../../bench/support.ts';
import { nextMessage as next, ROOT } from '../../tools/process.js';

/** Arrays of this many numbers (8 bytes each, unboxed doubles), made and dropped at once: garbage only. */
const ARRAY_LENGTH = 1_000;
const ARRAYS = 4_000;
/** What `makeGarbage` allocates: the arrays' backing stores alone, a lower bound of the true count. */
const GARBAGE_BYTES = ARRAYS * ARRAY_LENGTH * 8;

/**
 * A process that, on 'garbage', makes ARRAYS arrays in `makeGarbage` and keeps none (scavenges
 * collect them as they go), then answers; it makes as much again before it is asked to sample.
 */
const SCRIPT = `
function makeGarbage() {
  let sum = 0;
  for (let i = 0; i < ${ARRAYS}; i++) { const a = new Array(${ARRAY_LENGTH}).fill(i + 0.5); sum += a[7]; }
  return sum;
}
makeGarbage();
process.on('message', (message) => {
  if (message === 'garbage') process.send({ made: makeGarbage() });
});
process.send({ ready: true });
setInterval(() => {}, 1000);
`;

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

async function node(args: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...ALLOCATION_SAMPLER, ...args], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(child);
  await next(child, 'ready');
  return child;
}

/** The bytes a profile puts on frames of the function `name`, and in all. */
function bytesOf(head: AllocationNode, name: string): { named: number; total: number } {
  let named = 0;
  const visit = (node: AllocationNode) => {
    if (node.callFrame.functionName === name) named += node.selfSize;
    node.children.forEach(visit);
  };
  visit(head);
  const total = [...bytesByGroup(head).values()].reduce((sum, n) => sum + n, 0);
  return { named, total };
}

test('estimates the bytes a run allocated, collected garbage included, on the function that allocated them', async () => {
  const child = await node(['-e', SCRIPT]);
  const { profile } = await sampleAllocations<number, { head: AllocationNode }>(child, async () => {
    const made = next<number>(child, 'made');
    child.send('garbage');
    return made;
  });
  const { named, total } = bytesOf(profile.head, 'makeGarbage');
  // Sampled every 512 bytes on average: thousands of samples, an estimate within a few percent.
  expect(named).toBeGreaterThan(GARBAGE_BYTES * 0.9);
  expect(named).toBeLessThan(GARBAGE_BYTES * 1.25);
  expect(total).toBeLessThan(GARBAGE_BYTES * 1.5);
});

test('counts nothing allocated before the run', async () => {
  const child = await node(['-e', SCRIPT]);
  const { profile } = await sampleAllocations<undefined, { head: AllocationNode }>(child, async () => undefined);
  expect(bytesOf(profile.head, 'makeGarbage').named).toBe(0);
});

test('the sampler keeps no process alive', async () => {
  const child = await node(['-e', 'process.send({ ready: true }); setTimeout(() => {}, 200)']);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await sampleAllocations(child, async () => undefined);
  await expect(exited).resolves.toBe(0);
}, 10_000);
