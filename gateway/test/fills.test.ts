import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { Fills } from '../src/cache/fills.js';
import type { ReadScope } from '../src/cache/scope.js';
import type { FetchedResponse } from '../src/upstream.js';

/** Request collapsing: one fill per entry and generation, started or announced. */
const scope: ReadScope = { entryKey: 'c:{users}:', generationKey: 'g:{users}', holdKey: 'h:{users}' };
const other: ReadScope = { entryKey: 'c:{users}:limit=1', generationKey: 'g:{users}', holdKey: 'h:{users}' };
const fetched: FetchedResponse = { status: 200, headers: { etag: '"1"' }, body: Buffer.from('[]') };

/** A response as `announce` sees it: something that closes. */
const response = () => new EventEmitter() as unknown as ServerResponse;

/** A fill's `done`, and what settles it. */
function pending(): { promise: Promise<undefined>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<undefined>((settle) => (resolve = () => settle(undefined)));
  return { promise, resolve };
}

describe('Fills', () => {
  it('has nothing under way before a fill is announced or started', () => {
    const fills = new Fills();
    expect(fills.started(scope, 'g1')).toBeUndefined();
    expect(fills.underWay(scope, 'g1')).toBeUndefined();
  });

  it('shares a started fill for its entry and generation until it is done, and only those', async () => {
    const fills = new Fills();
    const flight = Promise.resolve(fetched);
    const done = pending();
    fills.start(scope, 'g1', flight, done.promise);
    expect(fills.started(scope, 'g1')).toBe(flight);
    expect((await fills.underWay(scope, 'g1'))?.flight).toBe(flight);
    expect(fills.started(scope, 'g2')).toBeUndefined();
    expect(fills.started(other, 'g1')).toBeUndefined();
    done.resolve();
    await done.promise;
    await Promise.resolve();
    expect(fills.started(scope, 'g1')).toBeUndefined();
  });

  it('lets requests wait for an announced fill, and gives them the fill once it starts', async () => {
    const fills = new Fills();
    fills.announce(scope, 'g1', response());
    expect(fills.started(scope, 'g1')).toBeUndefined();
    const waiting = fills.underWay(scope, 'g1');
    expect(waiting).toBeInstanceOf(Promise);
    const flight = Promise.resolve(fetched);
    fills.start(scope, 'g1', flight, pending().promise);
    expect((await waiting)?.flight).toBe(flight);
  });

  it('tells the waiters (undefined) when the announcing response closes without starting the fill', async () => {
    const fills = new Fills();
    const res = response();
    fills.announce(scope, 'g1', res);
    const waiting = fills.underWay(scope, 'g1');
    res.emit('close');
    await expect(waiting).resolves.toBeUndefined();
    expect(fills.underWay(scope, 'g1')).toBeUndefined();
  });

  it('keeps a started fill when the response that announced it closes', async () => {
    const fills = new Fills();
    const res = response();
    fills.announce(scope, 'g1', res);
    const flight = Promise.resolve(fetched);
    fills.start(scope, 'g1', flight, pending().promise);
    res.emit('close');
    expect(fills.started(scope, 'g1')).toBe(flight);
    expect((await fills.underWay(scope, 'g1'))?.flight).toBe(flight);
  });

  it('counts only the first announcement of a fill, and none of one already started', async () => {
    const fills = new Fills();
    const first = response();
    const second = response();
    fills.announce(scope, 'g1', first);
    fills.announce(scope, 'g1', second);
    const waiting = fills.underWay(scope, 'g1');
    second.emit('close'); // not the announcer: the wait goes on
    expect(fills.underWay(scope, 'g1')).toBe(waiting);
    first.emit('close');
    await expect(waiting).resolves.toBeUndefined();

    const flight = Promise.resolve(fetched);
    fills.start(other, 'g1', flight, pending().promise);
    const late = response();
    fills.announce(other, 'g1', late);
    late.emit('close');
    expect((await fills.underWay(other, 'g1'))?.flight).toBe(flight);
  });

  it('does not let an earlier fill that ends remove a later one of the same entry and generation', async () => {
    const fills = new Fills();
    const earlierDone = pending();
    fills.start(scope, 'g1', Promise.resolve(fetched), earlierDone.promise);
    const later = Promise.resolve(fetched);
    fills.start(scope, 'g1', later, pending().promise);
    earlierDone.resolve();
    await earlierDone.promise;
    await Promise.resolve();
    expect(fills.started(scope, 'g1')).toBe(later);
  });
});
