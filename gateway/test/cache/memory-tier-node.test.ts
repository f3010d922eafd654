import { jest } from '@jest/globals';
import { EventEmitter } from 'node:events';
import { createLogger } from '@app/shared/platform/logger';
import { MemoryTier } from '../../src/cache/memory-tier.js';
import { HEARTBEAT_MS } from '../../src/cache/memory-tier/node-tracking.js';
import type { CachedResponse } from '../../src/cache/entry.js';
import type { Redis } from '../../src/redis/client.js';

/**
 * The memory tier on one Redis, with connections that stand in for Redis's so the test decides
 * when each reply and each invalidation arrives; fake timers drive the heartbeat, the lease and
 * the barrier's wait.
 */
const logger = createLogger('memory-tier-node-test', 'silent');
const PREFIX = 'p:';
const INVALIDATIONS = '__redis__:invalidate';

/** A promise the test settles itself. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((ok, fail) => ((resolve = ok), (reject = fail)));
  return { promise, resolve, reject };
}

/** One connection: answers at once unless the test holds a reply back (`hold…`). */
class FakeConnection extends EventEmitter {
  status = 'ready';
  clientId = 7;
  readonly calls: string[][] = [];
  readonly published: [string, string][] = [];
  readonly subscribed: string[][] = [];
  readonly mgets: string[][] = [];
  readonly disconnects: (boolean | undefined)[] = [];
  pings = 0;
  /** Set: pings wait for the test (`pong`). */
  heldPings: ReturnType<typeof deferred<string>>[] | undefined;
  /** Set: CLIENT ID waits for the test. */
  heldId: ReturnType<typeof deferred<number>> | undefined;
  /** Set: PUBLISH waits for the test. */
  heldPublish: ReturnType<typeof deferred<number>> | undefined;
  /** Set: MGET waits for the test (each its own). */
  heldMgets: ReturnType<typeof deferred<(string | null)[]>>[] | undefined;
  subscribers = 2;
  values = new Map<string, string>();
  failTracking = false;
  failSubscribe = false;

  async call(...args: string[]): Promise<unknown> {
    this.calls.push(args);
    if (this.failTracking) throw new Error('ERR tracking refused');
    return 'OK';
  }
  client(): Promise<number> {
    return this.heldId ? this.heldId.promise : Promise.resolve(this.clientId);
  }
  async subscribe(...channels: string[]): Promise<number> {
    this.subscribed.push(channels);
    if (this.failSubscribe) throw new Error('ERR subscribe refused');
    return channels.length;
  }
  ping(): Promise<string> {
    this.pings += 1;
    if (!this.heldPings) return Promise.resolve('PONG');
    const reply = deferred<string>();
    this.heldPings.push(reply);
    return reply.promise;
  }
  publish(channel: string, message: string): Promise<number> {
    this.published.push([channel, message]);
    return this.heldPublish ? this.heldPublish.promise : Promise.resolve(this.subscribers);
  }
  mget(...keys: string[]): Promise<(string | null)[]> {
    this.mgets.push(keys);
    if (!this.heldMgets) return Promise.resolve(keys.map((key) => this.values.get(key) ?? null));
    const reply = deferred<(string | null)[]>();
    this.heldMgets.push(reply);
    return reply.promise;
  }
  disconnect(reconnect?: boolean): void {
    this.disconnects.push(reconnect);
  }
  /** Redis sends a message on `channel` (an invalidation's keys, null for a flush). */
  message(channel: string, payload: string | string[] | null): void {
    const message = payload === null ? null : Array.isArray(payload) ? payload.map((key) => Buffer.from(key)) : Buffer.from(payload);
    this.emit('messageBuffer', Buffer.from(channel), message);
  }
  invalidate(keys: string[] | null): void {
    this.message(INVALIDATIONS, keys);
  }
  drop(): void {
    this.status = 'reconnecting';
    this.emit('close');
  }
  back(clientId = this.clientId + 1): void {
    this.clientId = clientId;
    this.status = 'ready';
    this.emit('ready');
  }
}

/** Lets the promise chains run to their end (real setImmediate: the fake timers leave it alone). */
async function turns(count = 10): Promise<void> {
  for (let i = 0; i < count; i++) await new Promise((resolve) => setImmediate(resolve));
}

const scopeOf = (tag: string) => ({ entryKey: `c:{${tag}}:`, generationKey: `g:{${tag}}`, holdKey: `h:{${tag}}` });
const entryOf = (generation: string, extra: Partial<CachedResponse> = {}): CachedResponse => ({
  generation,
  storedAt: 1_000,
  status: 200,
  headers: { 'content-type': 'application/json' },
  body: Buffer.from('{"a":1}'),
  ...extra,
});

let tracked: FakeConnection;
let subscriber: FakeConnection;
let tier: MemoryTier;

function newTier(maxBytes = 1024 * 1024, keyPrefix = PREFIX): MemoryTier {
  tier = new MemoryTier({ tracked: tracked as unknown as Redis, subscriber: subscriber as unknown as Redis }, maxBytes, logger, keyPrefix);
  return tier;
}

/** Installs `generation` for `scope` as a lookup does: a read sent while tracking, nothing in between. */
function learnGeneration(scope: ReturnType<typeof scopeOf>, generation: string): void {
  const read = tier.watch(scope);
  expect(read).toBeDefined();
  tier.learnGeneration(read!, generation);
}

/** Holds `entry` for `scope` (generation learnt first) and takes a lease: `held` answers it from now on. */
async function holdEntry(scope: ReturnType<typeof scopeOf>, entry = entryOf('g1')) {
  learnGeneration(scope, entry.generation);
  tier.learn(scope, entry);
  tier.held(scope); // asks for the lease
  await turns();
  const held = tier.held(scope);
  expect(held).toBeDefined();
  return held!;
}

beforeEach(async () => {
  jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] });
  tracked = new FakeConnection();
  subscriber = new FakeConnection();
});
afterEach(async () => {
  await tier?.close();
  jest.useRealTimers();
});

describe('turning tracking on', () => {
  it('subscribes to the invalidations and its barrier channels, then tracks the prefixed generations and holds, redirected there', async () => {
    newTier();
    expect(tier.tracking).toBe(false);
    await turns();
    expect(subscriber.subscribed).toHaveLength(1);
    const [invalidations, barrier, ack] = subscriber.subscribed[0]!;
    expect([invalidations, barrier]).toEqual([INVALIDATIONS, 'p:gateway:barrier']);
    expect(ack).toMatch(/^p:gateway:barrier-ack:[0-9a-f]{16}$/);
    expect(tracked.calls).toEqual([
      ['CLIENT', 'TRACKING', 'OFF'],
      ['CLIENT', 'TRACKING', 'ON', 'REDIRECT', '7', 'BCAST', 'PREFIX', 'p:g:{', 'PREFIX', 'p:h:{'],
    ]);
    expect(subscriber.calls).toEqual([]);
    expect(tier.tracking).toBe(true);
  });

  it('gives every tier an acknowledgement channel of its own', async () => {
    newTier();
    const other = new MemoryTier({ tracked: new FakeConnection() as unknown as Redis, subscriber: subscriber as unknown as Redis }, 1024, logger, PREFIX);
    await turns();
    await other.close();
    expect(subscriber.subscribed[0]![2]).not.toBe(subscriber.subscribed[1]![2]);
  });

  it('has no prefix unless given one', async () => {
    tier = new MemoryTier({ tracked: tracked as unknown as Redis, subscriber: subscriber as unknown as Redis }, 1024, logger);
    await turns();
    expect(subscriber.subscribed[0]!.slice(0, 2)).toEqual([INVALIDATIONS, 'gateway:barrier']);
    expect(tracked.calls[1]).toEqual(['CLIENT', 'TRACKING', 'ON', 'REDIRECT', '7', 'BCAST', 'PREFIX', 'g:{', 'PREFIX', 'h:{']);
  });

  it('waits for a subscriber not yet connected, and for a tracked connection not yet connected', async () => {
    subscriber.status = 'connecting';
    tracked.status = 'connecting';
    newTier();
    await turns();
    expect(subscriber.subscribed).toEqual([]);
    subscriber.back(9);
    await turns();
    expect(subscriber.subscribed).toHaveLength(1);
    expect(tracked.calls).toEqual([]);
    expect(tier.tracking).toBe(false);
    tracked.back();
    await turns();
    expect(tracked.calls[1]).toContain('9');
    expect(tier.tracking).toBe(true);
  });

  it('stays off when the subscription or the tracking is refused', async () => {
    subscriber.failSubscribe = true;
    newTier();
    await turns();
    expect(tracked.calls).toEqual([]);
    expect(tier.tracking).toBe(false);
    await tier.close();

    subscriber = new FakeConnection();
    tracked = new FakeConnection();
    tracked.failTracking = true;
    newTier();
    await turns();
    expect(tracked.calls).toHaveLength(2);
    expect(tier.tracking).toBe(false);
    expect(tier.watch(scopeOf('a'))).toBeUndefined();
  });

  it('does not track towards a subscriber connection lost while it was subscribing', async () => {
    subscriber.heldId = deferred<number>();
    newTier();
    await turns();
    subscriber.drop();
    subscriber.heldId.resolve(7);
    await turns();
    expect(tracked.calls).toEqual([]);
    expect(tier.tracking).toBe(false);
  });

  it('does not turn on when a connection was lost while Redis turned tracking on', async () => {
    const tracking = deferred<unknown>();
    tracked.call = async (...args: string[]) => {
      tracked.calls.push(args);
      return tracking.promise;
    };
    newTier();
    await turns();
    expect(tracked.calls).toHaveLength(2);
    tracked.drop();
    tracking.resolve('OK');
    await turns();
    expect(tier.tracking).toBe(false);
  });
});

describe('what it serves', () => {
  it('serves a learnt entry with its own header list, body and generation key once its generation is known and leased', async () => {
    newTier();
    await turns();
    const scope = scopeOf('a');
    const body = Buffer.alloc(4096, 'x').subarray(0, 7);
    const held = await holdEntry(scope, entryOf('g1', { body }));
    expect(held).toEqual({ ...entryOf('g1'), body: Buffer.from('xxxxxxx'), headerList: ['content-type', 'application/json'], variants: undefined, generationKey: 'g:{a}' });
    expect(held.body.buffer.byteLength).toBe(7);
    expect(held.variants).toBeUndefined();
    expect(tracked.mgets).toEqual([]);
  });

  it('keeps its own copy of each variant, with its header list, and only the codings it knows', async () => {
    newTier();
    await turns();
    const slab = Buffer.alloc(4096, 'z');
    const variants = {
      br: { headers: { 'content-encoding': 'br' }, body: slab.subarray(0, 3) },
      gzip: { headers: { 'content-encoding': 'gzip' }, body: slab.subarray(10, 15) },
      zstd: { headers: { 'content-encoding': 'zstd' }, body: slab.subarray(0, 1) },
    } as unknown as CachedResponse['variants'];
    const held = await holdEntry(scopeOf('v'), entryOf('g1', { variants }));
    expect(held.variants).toEqual({
      br: { headers: { 'content-encoding': 'br' }, body: Buffer.from('zzz'), headerList: ['content-encoding', 'br'] },
      gzip: { headers: { 'content-encoding': 'gzip' }, body: Buffer.from('zzzzz'), headerList: ['content-encoding', 'gzip'] },
    });
    expect(held.variants!.br!.body.buffer.byteLength).toBe(3);
    expect(held.variants!.gzip!.body.buffer.byteLength).toBe(5);
  });

  it('keeps only one variant when only one is given', async () => {
    newTier();
    await turns();
    const variants = { gzip: { headers: {}, body: Buffer.from('g') } };
    const held = await holdEntry(scopeOf('v1'), entryOf('g1', { variants }));
    expect(Object.keys(held.variants!)).toEqual(['gzip']);
  });

  it('serves nothing for an entry whose generation is no longer the one learnt, nor for one never learnt', async () => {
    newTier();
    await turns();
    const scope = scopeOf('a');
    await holdEntry(scope);
    learnGeneration(scope, 'g2');
    expect(tier.held(scope)).toBeUndefined();
    expect(tier.held(scopeOf('never'))).toBeUndefined();
  });

  it('serves nothing and asks no lease while it does not track', async () => {
    subscriber.failSubscribe = true;
    newTier();
    await turns();
    expect(tier.held(scopeOf('a'))).toBeUndefined();
    await turns();
    expect(subscriber.pings).toBe(0);
  });

  it('does not learn an entry while it does not track, nor read its generation', async () => {
    tracked.status = 'connecting';
    newTier();
    await turns();
    tracked.values.set('g:{a}', 'g1');
    tier.learn(scopeOf('a'), entryOf('g1'));
    await turns();
    expect(tracked.mgets).toEqual([]);
    expect(tier.heldBytes).toBe(0);
  });
});

describe('learning a generation', () => {
  it('reads the hold and the generation of an entry whose generation it does not know, and keeps the entry if it is current', async () => {
    newTier();
    await turns();
    tracked.values.set('g:{a}', 'g1');
    const scope = scopeOf('a');
    tier.learn(scope, entryOf('g1'));
    await turns();
    expect(tracked.mgets).toEqual([['h:{a}', 'g:{a}']]);
    tier.held(scope);
    await turns();
    expect(tier.held(scope)?.generation).toBe('g1');
  });

  it('keeps nothing when the scope is held, its generation is another, there is none, or the read fails', async () => {
    newTier();
    await turns();
    tracked.values.set('h:{held}', '1').set('g:{held}', 'g1').set('g:{other}', 'g2');
    for (const tag of ['held', 'other', 'none']) tier.learn(scopeOf(tag), entryOf('g1'));
    tracked.mget = async (...keys: string[]) => {
      tracked.mgets.push(keys);
      throw new Error('connection lost');
    };
    tier.learn(scopeOf('failed'), entryOf('g1'));
    await turns();
    expect(tracked.mgets).toHaveLength(4);
    // Only the other generation read is held: 160 bytes, its key and its value.
    expect(tier.heldBytes).toBe(160 + 'g:{other}'.length + 2);
  });

  it('reads a scope once however many entries of it are learnt meanwhile, and again once that read is done', async () => {
    newTier();
    await turns();
    tracked.values.set('g:{a}', 'g1');
    tracked.heldMgets = [];
    tier.learn(scopeOf('a'), entryOf('g1'));
    tier.learn({ ...scopeOf('a'), entryKey: 'c:{a}:page=2' }, entryOf('g1'));
    expect(tracked.mgets).toHaveLength(1);
    tracked.heldMgets[0]!.resolve([null, 'g1']);
    await turns();
    expect(tier.held({ ...scopeOf('a'), entryKey: 'c:{a}:page=2' })).toBeUndefined(); // asks the lease
    await turns();
    expect(tier.held(scopeOf('a'))).toBeDefined();
    expect(tier.held({ ...scopeOf('a'), entryKey: 'c:{a}:page=2' })).toBeDefined();
    tier.forget([scopeOf('a')]);
    tier.learn(scopeOf('a'), entryOf('g1'));
    expect(tracked.mgets).toHaveLength(2);
  });

  it('does not let a read from before a flush stand for the read of the same scope sent since', async () => {
    newTier();
    await turns();
    tracked.heldMgets = [];
    tier.learn(scopeOf('a'), entryOf('g1'));
    subscriber.invalidate(null);
    tier.learn(scopeOf('a'), entryOf('g1'));
    expect(tracked.mgets).toHaveLength(2);
    tracked.heldMgets[0]!.resolve([null, 'g1']);
    await turns();
    tier.learn(scopeOf('a'), entryOf('g1'));
    expect(tracked.mgets).toHaveLength(2);
    tracked.heldMgets[1]!.resolve([null, 'g1']);
    await turns();
    tier.held(scopeOf('a'));
    await turns();
    expect(tier.held(scopeOf('a'))).toBeDefined();
  });

  it('installs the generation a read found current with no hold', async () => {
    newTier();
    await turns();
    const scope = scopeOf('a');
    learnGeneration(scope, 'g1');
    tier.learn(scope, entryOf('g1'));
    // Known: kept at once, no read of its own.
    expect(tracked.mgets).toEqual([]);
    expect(tier.heldBytes).toBeGreaterThan(0);
  });

  it('installs nothing for a read that found no generation or a hold', async () => {
    newTier();
    await turns();
    const read = tier.watch(scopeOf('a'))!;
    tier.learnGeneration(read, null);
    expect(tier.heldBytes).toBe(0);
  });

  it('installs nothing read before an invalidation of its generation or of its hold arrived', async () => {
    newTier();
    await turns();
    for (const [tag, key] of [
      ['a', 'p:g:{a}'],
      ['b', 'p:h:{b}'],
    ] as const) {
      const read = tier.watch(scopeOf(tag))!;
      subscriber.invalidate([key]);
      tier.learnGeneration(read, 'g1');
    }
    expect(tier.heldBytes).toBe(0);
    // A read sent after the invalidation installs what it read.
    learnGeneration(scopeOf('a'), 'g1');
    expect(tier.heldBytes).toBeGreaterThan(0);
  });

  it('spoils every read under way of an invalidated scope, however many there are', async () => {
    newTier();
    await turns();
    const scope = scopeOf('a');
    const first = tier.watch(scope)!;
    const second = tier.watch(scope)!;
    tier.learnGeneration(first, 'g1');
    subscriber.invalidate(['p:g:{a}']);
    tier.learnGeneration(second, 'g1');
    expect(tier.heldBytes).toBe(0);
  });

  it('spoils every read under way of an invalidated scope, whichever ends first', async () => {
    newTier();
    await turns();
    const first = tier.watch(scopeOf('a'))!;
    const second = tier.watch(scopeOf('a'))!;
    subscriber.invalidate(['p:g:{a}']);
    tier.learnGeneration(first, 'g1');
    tier.learnGeneration(second, 'g1');
    expect(tier.heldBytes).toBe(0);
  });

  it('spoils a read sent before a flush and a lost connection both', async () => {
    newTier();
    await turns();
    const read = tier.watch(scopeOf('a'))!;
    subscriber.invalidate(null);
    tracked.drop();
    tracked.back();
    await turns();
    tier.learnGeneration(read, 'g1');
    expect(tier.heldBytes).toBe(0);
  });

  it('spoils a read sent after a flush, when one sent before it ends first', async () => {
    newTier();
    await turns();
    const scope = scopeOf('a');
    const before = tier.watch(scope)!;
    subscriber.invalidate(null);
    const after = tier.watch(scope)!;
    tier.learnGeneration(before, 'g1');
    expect(tier.heldBytes).toBe(0);
    subscriber.invalidate(['p:g:{a}']);
    tier.learnGeneration(after, 'g1');
    expect(tier.heldBytes).toBe(0);
  });

  it('installs nothing read before a connection was lost, even once tracking is back', async () => {
    newTier();
    await turns();
    const read = tier.watch(scopeOf('a'))!;
    tracked.drop();
    tracked.back();
    await turns();
    expect(tier.tracking).toBe(true);
    tier.learnGeneration(read, 'g1');
    expect(tier.heldBytes).toBe(0);
  });

  it('does not keep an entry of a generation other than the one its read found', async () => {
    newTier();
    await turns();
    tracked.values.set('g:{a}', 'g2');
    tier.learn(scopeOf('a'), entryOf('g1'));
    await turns();
    // Only the generation read is held: 160 bytes, its key and its value.
    expect(tier.heldBytes).toBe(160 + 5 + 2);
  });

  it('keeps nothing whose read ended after tracking was lost', async () => {
    newTier();
    await turns();
    tracked.heldMgets = [];
    tier.learn(scopeOf('a'), entryOf('g1'));
    subscriber.drop();
    tracked.heldMgets[0]!.resolve([null, 'g1']);
    await turns();
    expect(tier.heldBytes).toBe(0);
  });
});

describe('invalidations', () => {
  it('forgets a scope when Redis invalidates its generation or its hold, and only that scope', async () => {
    newTier();
    await turns();
    for (const tag of ['a', 'b', 'c']) await holdEntry(scopeOf(tag));
    subscriber.invalidate(['p:g:{a}', 'p:h:{b}']);
    expect(tier.held(scopeOf('a'))).toBeUndefined();
    expect(tier.held(scopeOf('b'))).toBeUndefined();
    expect(tier.held(scopeOf('c'))).toBeDefined();
  });

  it('drops everything on a flush', async () => {
    newTier();
    await turns();
    await holdEntry(scopeOf('a'));
    subscriber.invalidate(null);
    expect(tier.heldBytes).toBe(0);
    expect(tier.tracking).toBe(true);
  });

  it('forgets the scopes of its own writes at once', async () => {
    newTier();
    await turns();
    await holdEntry(scopeOf('a'));
    await holdEntry(scopeOf('b'));
    const read = tier.watch(scopeOf('a'))!;
    tier.forget([scopeOf('a')]);
    tier.learnGeneration(read, 'g1');
    expect(tier.held(scopeOf('a'))).toBeUndefined();
    expect(tier.held(scopeOf('b'))).toBeDefined();
  });

  it('tells its listeners the keys of every invalidation without the prefix, until they stop listening', async () => {
    newTier();
    await turns();
    const heard: (readonly string[])[] = [];
    const other: (readonly string[])[] = [];
    const stop = tier.onInvalidation((keys) => heard.push(keys));
    tier.onInvalidation((keys) => other.push(keys));
    subscriber.invalidate(['p:g:{a}', 'elsewhere:g:{b}']);
    subscriber.invalidate(null);
    stop();
    stop();
    subscriber.invalidate(['p:h:{c}']);
    expect(heard).toEqual([['g:{a}', 'elsewhere:g:{b}'], []]);
    expect(other).toEqual([['g:{a}', 'elsewhere:g:{b}'], [], ['h:{c}']]);
  });

  it('ignores messages on channels it does not listen to, even before it listens', async () => {
    subscriber.status = 'connecting';
    newTier();
    subscriber.message('p:gateway:barrier', 'x 1');
    subscriber.back();
    await turns();
    await holdEntry(scopeOf('a'));
    subscriber.message('elsewhere', 'p:g:{a}');
    expect(tier.held(scopeOf('a'))).toBeDefined();
    expect(tracked.published).toEqual([]);
  });
});

describe('connections lost', () => {
  it('goes off and drops everything when either connection is lost, and serves again only what it learns once both track again', async () => {
    newTier();
    await turns();
    for (const connection of [subscriber, tracked]) {
      await holdEntry(scopeOf('a'));
      connection.drop();
      expect(tier.tracking).toBe(false);
      expect(tier.heldBytes).toBe(0);
      expect(tier.watch(scopeOf('a'))).toBeUndefined();
      connection.back();
      await turns();
      expect(tier.tracking).toBe(true);
      expect(tier.held(scopeOf('a'))).toBeUndefined();
    }
    // A new subscriber has a new id: tracking is redirected to it.
    expect(tracked.calls.filter((call) => call[2] === 'ON').map((call) => call[4])).toEqual(['7', '8', '8']);
  });

  it('does not keep the lease a ping sent before a reset brings back', async () => {
    newTier();
    await turns();
    subscriber.heldPings = [];
    tier.held(scopeOf('a')); // a renewal under way
    expect(subscriber.heldPings).toHaveLength(1);
    tracked.drop();
    tracked.back();
    await turns();
    learnGeneration(scopeOf('a'), 'g1');
    tier.learn(scopeOf('a'), entryOf('g1'));
    subscriber.heldPings[0]!.resolve('PONG');
    await turns();
    expect(tier.held(scopeOf('a'))).toBeUndefined();
    expect(subscriber.heldPings).toHaveLength(2);
    subscriber.heldPings[1]!.resolve('PONG');
    await turns();
    expect(tier.held(scopeOf('a'))).toBeDefined();
  });

  it('does not track towards a subscriber that is gone, when the tracked connection comes back first', async () => {
    newTier();
    await turns();
    subscriber.drop();
    tracked.drop();
    tracked.back();
    await turns();
    expect(tracked.calls).toHaveLength(2);
    expect(tier.tracking).toBe(false);
  });

  it('needs a new lease after a reset, however recent the last one', async () => {
    newTier();
    await turns();
    await holdEntry(scopeOf('a'));
    const pings = subscriber.pings;
    tracked.drop();
    tracked.back();
    await turns();
    learnGeneration(scopeOf('a'), 'g1');
    tier.learn(scopeOf('a'), entryOf('g1'));
    expect(tier.held(scopeOf('a'))).toBeUndefined();
    expect(subscriber.pings).toBe(pings + 1);
    await turns();
    expect(tier.held(scopeOf('a'))).toBeDefined();
  });

  it('turns on again when the tracked connection comes back alone', async () => {
    newTier();
    await turns();
    tracked.drop();
    tracked.back();
    await turns();
    expect(tracked.calls).toHaveLength(4);
    expect(tier.tracking).toBe(true);
    // Ready again while tracking: asked again, and still on.
    tracked.emit('ready');
    await turns();
    expect(tier.tracking).toBe(true);
  });
});

describe('the lease', () => {
  async function leasedTier() {
    newTier();
    await turns();
    subscriber.heldPings = [];
    const scope = scopeOf('a');
    learnGeneration(scope, 'g1');
    tier.learn(scope, entryOf('g1'));
    expect(tier.held(scope)).toBeUndefined(); // no lease yet: one asked for
    expect(subscriber.pings).toBe(1);
    subscriber.heldPings[0]!.resolve('PONG');
    await turns();
    return scope;
  }

  it('serves for 200 ms from the ping that brought it, renewed once half is spent, one ping at a time', async () => {
    const scope = await leasedTier();
    jest.advanceTimersByTime(100);
    expect(tier.held(scope)).toBeDefined();
    expect(subscriber.pings).toBe(1);
    jest.advanceTimersByTime(1);
    expect(tier.held(scope)).toBeDefined();
    expect(tier.held(scope)).toBeDefined();
    expect(subscriber.pings).toBe(2);
    jest.advanceTimersByTime(99);
    expect(tier.held(scope)).toBeDefined(); // 200 ms: still
    jest.advanceTimersByTime(1);
    expect(tier.held(scope)).toBeUndefined();
    expect(subscriber.pings).toBe(2);
    subscriber.heldPings![1]!.resolve('PONG');
    await turns();
    expect(tier.held(scope)).toBeDefined(); // from the renewal's ping, sent at 101 ms
    jest.advanceTimersByTime(100);
    expect(tier.held(scope)).toBeDefined();
    jest.advanceTimersByTime(1);
    expect(tier.held(scope)).toBeUndefined();
  });

  it('asks again when a renewal fails', async () => {
    const scope = await leasedTier();
    jest.advanceTimersByTime(150);
    tier.held(scope);
    expect(subscriber.pings).toBe(2);
    subscriber.heldPings![1]!.reject(new Error('lost'));
    await turns();
    tier.held(scope);
    expect(subscriber.pings).toBe(3);
  });
});

describe('the heartbeat', () => {
  it('pings the subscriber every beat once the last ping is answered', async () => {
    newTier();
    await turns();
    jest.advanceTimersByTime(HEARTBEAT_MS);
    expect(subscriber.pings).toBe(1);
    await turns();
    jest.advanceTimersByTime(HEARTBEAT_MS);
    expect(subscriber.pings).toBe(2);
    expect(subscriber.disconnects).toEqual([]);
  });

  it('drops the subscriber’s connection once a ping is unanswered for more than 1.5 s, and pings afresh on the new one', async () => {
    newTier();
    await turns();
    subscriber.heldPings = [];
    jest.advanceTimersByTime(HEARTBEAT_MS); // the ping, at 500 ms
    jest.advanceTimersByTime(3 * HEARTBEAT_MS); // 1.5 s unanswered
    expect(subscriber.pings).toBe(1);
    expect(subscriber.disconnects).toEqual([]);
    jest.advanceTimersByTime(HEARTBEAT_MS);
    expect(subscriber.disconnects).toEqual([true]);
    expect(subscriber.pings).toBe(1);
    jest.advanceTimersByTime(HEARTBEAT_MS);
    expect(subscriber.pings).toBe(2);
  });

  it('pings afresh on a connection that came back, not counting the unanswered ping of the lost one', async () => {
    newTier();
    await turns();
    subscriber.heldPings = [];
    jest.advanceTimersByTime(HEARTBEAT_MS);
    subscriber.drop();
    jest.advanceTimersByTime(HEARTBEAT_MS);
    expect(subscriber.pings).toBe(1);
    subscriber.back();
    await turns();
    jest.advanceTimersByTime(HEARTBEAT_MS);
    expect(subscriber.pings).toBe(2);
    jest.advanceTimersByTime(3 * HEARTBEAT_MS);
    expect(subscriber.disconnects).toEqual([]);
  });

  it('a late answer to a ping abandoned does not clear the ping sent since', async () => {
    newTier();
    await turns();
    subscriber.heldPings = [];
    jest.advanceTimersByTime(HEARTBEAT_MS);
    subscriber.drop();
    subscriber.back();
    await turns();
    jest.advanceTimersByTime(HEARTBEAT_MS); // the new connection's ping, at 1 s
    subscriber.heldPings[0]!.resolve('PONG'); // the old one's, late
    await turns();
    jest.advanceTimersByTime(4 * HEARTBEAT_MS);
    expect(subscriber.pings).toBe(2);
    expect(subscriber.disconnects).toEqual([true]);
  });

  it('counts a ping that failed as unanswered', async () => {
    newTier();
    await turns();
    subscriber.ping = () => {
      subscriber.pings += 1;
      return Promise.reject(new Error('lost'));
    };
    jest.advanceTimersByTime(HEARTBEAT_MS);
    await turns();
    jest.advanceTimersByTime(4 * HEARTBEAT_MS);
    expect(subscriber.pings).toBe(1);
    expect(subscriber.disconnects).toEqual([true]);
  });

  it('does not ping a subscriber that is not connected', async () => {
    subscriber.status = 'connecting';
    newTier();
    jest.advanceTimersByTime(4 * HEARTBEAT_MS);
    expect(subscriber.pings).toBe(0);
  });

  it('stops when the tier closes, and closes both connections', async () => {
    newTier();
    await turns();
    await tier.close();
    jest.advanceTimersByTime(4 * HEARTBEAT_MS);
    expect(subscriber.pings).toBe(0);
    expect(subscriber.disconnects).toEqual([undefined]);
    expect(tracked.disconnects).toEqual([undefined]);
    expect(tier.tracking).toBe(false);
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('after closing', () => {
  it('hears nothing more from its connections', async () => {
    newTier();
    await turns();
    const heard: (readonly string[])[] = [];
    tier.onInvalidation((keys) => heard.push(keys));
    await tier.close();
    subscriber.invalidate(['p:g:{a}']);
    subscriber.drop();
    subscriber.back();
    tracked.back();
    await turns();
    expect(heard).toEqual([]);
    expect(tier.tracking).toBe(false);
  });
});

describe('barriers', () => {
  it('publishes one on the barrier channel, naming its own acknowledgement channel, and resolves once every subscriber acknowledged', async () => {
    newTier();
    await turns();
    const ack = subscriber.subscribed[0]![2]!;
    let done = false;
    void tier.barrier().then(() => (done = true));
    await turns();
    expect(tracked.published).toEqual([['p:gateway:barrier', `${ack} 1`]]);
    subscriber.message(ack, '1');
    subscriber.message('elsewhere', '1');
    await turns();
    expect(done).toBe(false);
    subscriber.message(ack, '1');
    await turns();
    expect(done).toBe(true);
    // Nothing left waiting: a later barrier uses a new nonce.
    void tier.barrier();
    expect(tracked.published[1]).toEqual(['p:gateway:barrier', `${ack} 2`]);
  });

  it('resolves when the acknowledgements came before Redis said how many to expect', async () => {
    newTier();
    await turns();
    const ack = subscriber.subscribed[0]![2]!;
    tracked.heldPublish = deferred<number>();
    let done = false;
    void tier.barrier().then(() => (done = true));
    subscriber.message(ack, '1');
    subscriber.message(ack, '1');
    subscriber.message(ack, '99');
    await turns();
    expect(done).toBe(false);
    tracked.heldPublish.resolve(2);
    await turns();
    expect(done).toBe(true);
  });

  it('waits 250 ms at most for acknowledgements that do not come, or a publish that fails', async () => {
    newTier();
    await turns();
    for (const fail of [false, true]) {
      if (fail) tracked.publish = () => Promise.reject(new Error('lost'));
      let done = false;
      void tier.barrier().then(() => (done = true));
      await turns();
      jest.advanceTimersByTime(249);
      await turns();
      expect(done).toBe(false);
      jest.advanceTimersByTime(1);
      await turns();
      expect(done).toBe(true);
    }
  });

  it('waits out its time when its subscriber does not listen yet', async () => {
    subscriber.status = 'connecting';
    newTier();
    let done = false;
    void tier.barrier().then(() => (done = true));
    await turns();
    expect(tracked.published).toEqual([]);
    jest.advanceTimersByTime(249);
    await turns();
    expect(done).toBe(false);
    jest.advanceTimersByTime(1);
    await turns();
    expect(done).toBe(true);
  });

  it('leaves no timer behind once acknowledged', async () => {
    newTier();
    await turns();
    const ack = subscriber.subscribed[0]![2]!;
    tracked.subscribers = 1;
    const timers = jest.getTimerCount();
    let done = false;
    void tier.barrier().then(() => (done = true));
    await turns();
    subscriber.message(ack, '1');
    await turns();
    expect(done).toBe(true);
    expect(jest.getTimerCount()).toBe(timers);
  });

  it('acknowledges another tier’s barrier on the channel it names, with its nonce', async () => {
    newTier();
    await turns();
    subscriber.message('p:gateway:barrier', 'p:gateway:barrier-ack:other 42');
    subscriber.message('p:gateway:barrier', 'malformed');
    expect(tracked.published).toEqual([['p:gateway:barrier-ack:other', '42']]);
  });

  it('acknowledges even when the publish fails, without complaint', async () => {
    newTier();
    await turns();
    tracked.publish = () => Promise.reject(new Error('lost'));
    subscriber.message('p:gateway:barrier', 'p:gateway:barrier-ack:other 42');
    await turns();
    expect(tier.tracking).toBe(true);
  });
});

describe('its bytes', () => {
  it('counts an entry and its generation by their strings, bodies and headers (two bytes a character beyond Latin-1)', async () => {
    newTier();
    await turns();
    const scope = scopeOf('a');
    learnGeneration(scope, 'g1');
    expect(tier.heldBytes).toBe(160 + 5 + 2);
    const variants = { br: { headers: { 'content-encoding': 'br' }, body: Buffer.from('bb') } };
    tier.learn(scope, entryOf('g1', { headers: { 'content-type': 'text/plain', 'x-name': 'Zoë€' }, body: Buffer.from('hello'), variants }));
    const representation = 5 + (16 + 12 + 10) + (16 + 6 + 2 * 4);
    const variant = 512 + 2 + (16 + 16 + 2);
    expect(tier.heldBytes).toBe(160 + 5 + 2 + (512 + 6 + 5 + 2 + representation + variant));
  });

  it('counts a non-Latin-1 key at two bytes a character, a Latin-1 one at one', async () => {
    newTier();
    await turns();
    learnGeneration({ ...scopeOf('x'), generationKey: 'g:{é}' }, 'g1');
    expect(tier.heldBytes).toBe(160 + 5 + 2);
    tier.forget([{ ...scopeOf('x'), generationKey: 'g:{é}' }]);
    learnGeneration({ ...scopeOf('x'), generationKey: 'g:{€}' }, 'g1');
    expect(tier.heldBytes).toBe(160 + 10 + 2);
  });

  it('gives a quarter of its bytes to generations, least recently used out first', async () => {
    newTier(4 * 3 * 167);
    await turns();
    for (const tag of ['a', 'b', 'c', 'd']) learnGeneration(scopeOf(tag), 'g1');
    expect(tier.heldBytes).toBe(3 * 167);
    tier.learn(scopeOf('a'), entryOf('g1'));
    expect(tier.heldBytes).toBe(3 * 167);
    tier.learn(scopeOf('d'), entryOf('g1'));
    expect(tier.heldBytes).toBeGreaterThan(3 * 167);
  });

  it('can be made however small, or of an odd size', () => {
    // lru-cache refuses a maxSize that is not a positive integer.
    for (const size of [1, 1_001]) {
      const small = new MemoryTier({ tracked: new FakeConnection() as unknown as Redis, subscriber: new FakeConnection() as unknown as Redis }, size, logger);
      void small.close();
    }
  });
});
