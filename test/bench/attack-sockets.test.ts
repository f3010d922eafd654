/**
 * The pacer of `npm run bench:attacks` (bench/attack-sockets.ts): every loop of the bench is bounded
 * in count and in time, by the clock, even when the script falls behind its schedule.
 */
import { paced } from '../../bench/attack-sockets.ts';

/** A clock that moves only when told. */
const manualClock = () => {
  let ms = 0;
  return { now: () => ms, advance: (by: number) => (ms += by) };
};

test('starts at most `count`, and gives back what each start gave', async () => {
  const clock = manualClock();
  const given = await paced({ perSecond: 1_000_000, seconds: 60, count: 5 }, async (i) => i * 2, clock);
  expect(given).toEqual([0, 2, 4, 6, 8]);
});

test('stops when the clock passes its seconds, even with starts of its schedule left', async () => {
  const clock = manualClock();
  // 10 a second for 1 s is 10 starts by the schedule; each start here takes 300 ms of the clock.
  const given = await paced({ perSecond: 10, seconds: 1, count: 100 }, async (i) => (clock.advance(300), i), clock);
  expect(given).toEqual([0, 1, 2, 3]);
});

test('stops when told to', async () => {
  const clock = manualClock();
  let stopped = false;
  const given = await paced({ perSecond: 1_000_000, seconds: 60, count: 100, stopped: () => stopped }, async (i) => ((stopped = i === 2), i), clock);
  expect(given).toEqual([0, 1, 2]);
});
