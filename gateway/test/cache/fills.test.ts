import { type Fill, Fills } from '../../src/cache/fills.js';
import type { ReadKeying } from '../../src/cache/keys.js';

/** Request collapsing: one fill per entry and generation. */
const scope: ReadKeying = { entryKey: 'c:{users}:', generationKey: 'g:{users}', holdKey: 'h:{users}' };
const other: ReadKeying = { entryKey: 'c:{users}:limit=1', generationKey: 'g:{users}', holdKey: 'h:{users}' };
const fetched: Fill = {
  fetched: { status: 200, headers: { etag: '"1"' }, body: Buffer.from('[]') },
  representation: { status: 200, headers: { etag: '"1"' }, body: Buffer.from('[]') },
};

/** A fill's `done`, and what settles it. */
function pending(): { promise: Promise<undefined>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<undefined>((settle) => (resolve = () => settle(undefined)));
  return { promise, resolve };
}

describe('Fills', () => {
  it('has nothing under way before a fill is started', () => {
    const fills = new Fills();
    expect(fills.started(scope, 'g1')).toBeUndefined();
  });

  it('shares a started fill for its entry and generation until it is done, and only those', async () => {
    const fills = new Fills();
    const flight = Promise.resolve(fetched);
    const done = pending();
    fills.start(scope, 'g1', flight, done.promise);
    expect(fills.started(scope, 'g1')).toBe(flight);
    expect(fills.started(scope, 'g2')).toBeUndefined();
    expect(fills.started(other, 'g1')).toBeUndefined();
    done.resolve();
    await done.promise;
    await Promise.resolve();
    expect(fills.started(scope, 'g1')).toBeUndefined();
  });

  it('does not let an earlier fill that ends remove a later one of the same entry and generation', async () => {
    const fills = new Fills();
    const earlierDone = pending();
    fills.start(scope, 'g1', Promise.resolve(fetched), earlierDone.promise);
    const later = Promise.resolve({ ...fetched });
    fills.start(scope, 'g1', later, pending().promise);
    earlierDone.resolve();
    await earlierDone.promise;
    await Promise.resolve();
    expect(fills.started(scope, 'g1')).toBe(later);
  });
});
