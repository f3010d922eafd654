import { jest } from '@jest/globals';
import { ConcurrencyLimit, MAX_WAIT_MS, SHED_RETRY_AFTER_SECONDS } from '../../src/load-shedding/concurrency-limit.js';

/**
 * The load shedding per upstream: reads and writes each keep a reserve of the limit, a slot is
 * released once however often its release is called, a request may wait for a slot in order, for a
 * bounded time, and a caller holding its fair share is refused while others are. Time is the
 * limit's `Date.now()`, set here by hand, and its timers, faked.
 */
let clock = 1_000_000;
const realNow = Date.now;
beforeEach(() => {
  clock = 1_000_000;
  Date.now = () => clock;
});
afterEach(() => {
  Date.now = realNow;
});

/** Takes `count` slots of one kind; fails the test if one is refused. */
function take(limit: ConcurrencyLimit, count: number, write: boolean, caller?: string): (() => void)[] {
  const releases = [];
  for (let i = 0; i < count; i++) {
    const release = limit.tryAcquire(write, caller);
    if (!release) throw new Error(`slot ${i + 1} of ${count} refused`);
    releases.push(release);
  }
  return releases;
}

describe('ConcurrencyLimit reserves', () => {
  // Writes keep their share of the limit (rounded up, at least one slot, never all), reads all but
  // twice as much (never less than writes keep, nor more than they leave); alone, a kind takes every
  // slot but the other's reserve.
  it.each([
    { limit: 20, writeShare: 0.2, reads: 16, writes: 8, readReserve: 12, writeReserve: 4 },
    { limit: 2, writeShare: 0.99, reads: 1, writes: 1, readReserve: 1, writeReserve: 1 },
    { limit: 10, writeShare: 0.01, reads: 9, writes: 2, readReserve: 8, writeReserve: 1 },
    { limit: 10, writeShare: 0.7, reads: 3, writes: 7, readReserve: 3, writeReserve: 7 },
  ])('a limit of $limit with a write share of $writeShare: alone, $reads reads or $writes writes', ({ limit: slots, writeShare, reads, writes, readReserve, writeReserve }) => {
    const alone = new ConcurrencyLimit('users', { limit: slots, writeShare });
    const readsAlone = take(alone, reads, false);
    expect(alone.tryAcquire(false)).toBeUndefined();
    // The reads have left the writes their reserve, and no more.
    take(alone, writeReserve, true);
    expect(alone.tryAcquire(true)).toBeUndefined();
    for (const release of readsAlone) release();
    const writesAlone = take(alone, writes - writeReserve, true);
    expect(alone.tryAcquire(true)).toBeUndefined();
    take(alone, readReserve, false);
    expect(alone.tryAcquire(false)).toBeUndefined();
    for (const release of writesAlone) release();
    expect(alone.inFlight).toEqual({ read: readReserve, write: writeReserve });
  });

  it('lets either kind take the slots between the reserves, first come', () => {
    // 20 slots: writes keep 4, reads 12; 4 between.
    const limit = new ConcurrencyLimit('users', { limit: 20, writeShare: 0.2 });
    take(limit, 6, true);
    take(limit, 12, false);
    expect(limit.tryAcquire(true)).toBeDefined();
    expect(limit.tryAcquire(false)).toBeDefined();
    expect(limit.tryAcquire(false)).toBeUndefined();
    expect(limit.tryAcquire(true)).toBeUndefined();
    expect(limit.inFlight).toEqual({ read: 13, write: 7 });
  });
});

describe('ConcurrencyLimit release', () => {
  it('frees a slot exactly once, however often its release is called', () => {
    const limit = new ConcurrencyLimit('users', { limit: 4, writeShare: 0.25 });
    const [first, second, third] = take(limit, 3, false, 'alice');
    first!();
    first!();
    first!();
    expect(limit.inFlight).toEqual({ read: 2, write: 0 });
    second!();
    third!();
    expect(limit.inFlight).toEqual({ read: 0, write: 0 });
    // All three free again, and not more: a double release made no fourth read slot.
    take(limit, 3, false, 'alice');
    expect(limit.tryAcquire(false, 'alice')).toBeUndefined();
  });
});

describe('ConcurrencyLimit fair share', () => {
  // 20 slots: reads hold at most 16, of which a caller's fair share is 4.
  const settings = { limit: 20, writeShare: 0.2 };

  it('lets a lone caller take every slot of a kind', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const alice = take(limit, 16, false, 'sub:alice');
    expect(limit.inFlight.read).toBe(16);
    // Refused only for want of a slot: her own refusal does not make her share apply to her.
    expect(limit.tryAcquire(false, 'sub:alice')).toBeUndefined();
    alice.pop()!();
    expect(limit.tryAcquire(false, 'sub:alice')).toBeDefined();
  });

  it('refuses a caller holding its fair share while another caller was refused within the last second', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const alice = take(limit, 16, false, 'sub:alice');
    expect(limit.tryAcquire(false, 'sub:bob')).toBeUndefined(); // none free: bob is refused
    alice.pop()!();
    clock += 999;
    // Alice holds 15, far beyond her share of 4, and bob was refused 999 ms ago: the slot is not hers.
    expect(limit.tryAcquire(false, 'sub:alice')).toBeUndefined();
    expect(limit.tryAcquire(false, 'sub:bob')).toBeDefined();
  });

  it('keeps refusing the caller beyond its share, however often it asks, while the other waits', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const alice = take(limit, 16, false, 'sub:alice');
    expect(limit.tryAcquire(false, 'sub:bob')).toBeUndefined();
    alice.pop()!();
    alice.pop()!();
    // Refused for her share, twice: that does not make her the one remembered as refused.
    expect(limit.tryAcquire(false, 'sub:alice')).toBeUndefined();
    expect(limit.tryAcquire(false, 'sub:alice')).toBeUndefined();
    expect(limit.tryAcquire(false, 'sub:bob')).toBeDefined();
  });

  it('lets the caller take free slots again once nobody else was refused for a second', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const alice = take(limit, 16, false, 'sub:alice');
    expect(limit.tryAcquire(false, 'sub:bob')).toBeUndefined();
    alice.pop()!();
    clock += 1_000;
    expect(limit.tryAcquire(false, 'sub:alice')).toBeDefined();
  });

  it('does not hold back a caller below its fair share while others are refused', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const alice = take(limit, 13, false, 'sub:alice');
    take(limit, 3, false, 'sub:carol');
    expect(limit.tryAcquire(false, 'sub:bob')).toBeUndefined();
    alice.pop()!();
    // One slot free, bob refused just now: carol holds 3 of her share of 4, alice 12.
    expect(limit.tryAcquire(false, 'sub:alice')).toBeUndefined();
    expect(limit.tryAcquire(false, 'sub:carol')).toBeDefined();
  });

  it('counts the fair share per kind: reads held do not limit writes', () => {
    const limit = new ConcurrencyLimit('users', settings);
    take(limit, 16, false, 'sub:alice');
    expect(limit.tryAcquire(false, 'sub:bob')).toBeUndefined();
    expect(limit.tryAcquire(true, 'sub:alice')).toBeDefined();
  });

  it('never holds back requests with no caller to count', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const anonymous = take(limit, 16, false);
    expect(limit.tryAcquire(false, 'sub:bob')).toBeUndefined();
    anonymous.pop()!();
    expect(limit.tryAcquire(false)).toBeDefined();
  });

  it('gives back a caller’s slots as they are released', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const alice = take(limit, 16, false, 'sub:alice');
    expect(limit.tryAcquire(false, 'sub:bob')).toBeUndefined();
    // Down to 3 held, below her share of 4: she may take a free slot though bob was just refused.
    for (const release of alice.splice(0, 13)) release();
    expect(limit.tryAcquire(false, 'sub:alice')).toBeDefined();
  });
});

describe('ConcurrencyLimit waiting', () => {
  // 4 slots, 1 kept for writes and 2 for reads: reads alone hold 3, writes 2.
  const settings = { limit: 4, writeShare: 0.25 };
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['Date'] }));
  afterEach(() => jest.useRealTimers());

  /** Asks for a slot; what it was given so far (undefined: nothing yet, null: shed). */
  function ask(limit: ConcurrencyLimit, write: boolean, caller?: string) {
    const asked: { given?: (() => void) | null; stop?: () => void } = {};
    asked.stop = limit.acquire(write, caller, (release) => (asked.given = release ?? null));
    return asked;
  }

  it('gives a free slot at once, and one freed later to the first waiting, then the next', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const now = ask(limit, false);
    expect({ given: typeof now.given, stop: now.stop }).toEqual({ given: 'function', stop: undefined });
    const held = take(limit, 2, false);
    const [first, second] = [ask(limit, false), ask(limit, false)];
    expect([first.given, second.given, limit.waiting.read]).toEqual([undefined, undefined, 2]);
    held[0]!();
    expect([typeof first.given, second.given, limit.waiting.read]).toEqual(['function', undefined, 1]);
    held[1]!();
    expect(typeof second.given).toBe('function');
    expect(limit.inFlight.read).toBe(3);
  });

  it('gives a write a read slot freed when the reads left no room beyond the writes\' reserve', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const reads = take(limit, 3, false);
    take(limit, 1, true);
    const write = ask(limit, true);
    expect(write.given).toBeUndefined();
    reads[0]!();
    expect(typeof write.given).toBe('function');
    expect(limit.inFlight).toEqual({ read: 2, write: 2 });
  });

  it('sheds a request that waited MAX_WAIT_MS, and no slot is given to it after', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const held = take(limit, 3, false);
    const waiting = ask(limit, false);
    jest.advanceTimersByTime(MAX_WAIT_MS - 1);
    expect(waiting.given).toBeUndefined();
    jest.advanceTimersByTime(1);
    expect(waiting.given).toBeNull();
    held[0]!();
    expect(limit.inFlight.read).toBe(2);
  });

  it('stops waiting when told to: the slot freed goes to the next', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const held = take(limit, 3, false);
    const [gone, next] = [ask(limit, false), ask(limit, false)];
    gone.stop!();
    held[0]!();
    expect([gone.given, typeof next.given]).toEqual([undefined, 'function']);
    jest.advanceTimersByTime(MAX_WAIT_MS);
    expect(gone.given).toBeUndefined();
  });

  it('keeps a slot given after a wait: neither its wait running out nor a late stop touches it or the others waiting', () => {
    const limit = new ConcurrencyLimit('users', settings);
    const held = take(limit, 3, false);
    const [first, second] = [ask(limit, false), ask(limit, false)];
    held[0]!();
    expect(typeof first.given).toBe('function');
    first.stop!();
    expect(limit.waiting.read).toBe(1);
    jest.advanceTimersByTime(MAX_WAIT_MS - 1);
    held[1]!();
    expect(typeof second.given).toBe('function');
    jest.advanceTimersByTime(MAX_WAIT_MS);
    expect([typeof first.given, typeof second.given]).toEqual(['function', 'function']);
  });

  it('sheds at once a request with `limit` others of its kind waiting', () => {
    const limit = new ConcurrencyLimit('users', settings);
    take(limit, 3, false);
    const waiting = Array.from({ length: 4 }, () => ask(limit, false));
    const over = ask(limit, false);
    expect({ waiting: waiting.map((asked) => asked.given), over: over.given, stop: over.stop }).toEqual({ waiting: [undefined, undefined, undefined, undefined], over: null, stop: undefined });
  });

  it('lets as many wait as the service answered of their kind in the last MAX_WAIT_MS, one more is shed at once', () => {
    const limit = new ConcurrencyLimit('users', settings);
    for (let i = 0; i < 6; i++) take(limit, 1, true)[0]!();
    clock += MAX_WAIT_MS;
    take(limit, 2, true);
    const waiting = Array.from({ length: 6 }, () => ask(limit, true));
    const over = ask(limit, true);
    expect({ waiting: waiting.map((asked) => asked.given), over: over.given }).toEqual({ waiting: Array(6).fill(undefined), over: null });
  });

  it('forgets the pace of a window once a whole window passed with no slot freed', () => {
    const limit = new ConcurrencyLimit('users', settings);
    for (let i = 0; i < 6; i++) take(limit, 1, true)[0]!();
    clock += 2 * MAX_WAIT_MS;
    take(limit, 2, true);
    const waiting = Array.from({ length: 4 }, () => ask(limit, true));
    const over = ask(limit, true);
    expect({ waiting: waiting.map((asked) => asked.given), over: over.given }).toEqual({ waiting: Array(4).fill(undefined), over: null });
  });

  it('sheds at once a caller holding its fair share while another waits, and gives the freed slot to the other', () => {
    // 20 slots, 4 kept for writes: reads hold at most 16, a caller's fair share 4.
    const limit = new ConcurrencyLimit('users', { limit: 20, writeShare: 0.2 });
    const alice = take(limit, 16, false, 'sub:alice');
    const bob = ask(limit, false, 'sub:bob');
    expect(ask(limit, false, 'sub:alice').given).toBeNull();
    alice.pop()!();
    expect(typeof bob.given).toBe('function');
  });
});

describe('shedding', () => {
  it('answers 503 with Retry-After, naming the upstream, the same problem each time', () => {
    const limit = new ConcurrencyLimit('products', { limit: 4, writeShare: 0.25 });
    const problem = limit.shedProblem();
    expect(problem.status).toBe(503);
    expect(problem.detail).toContain('products');
    expect(problem.extras.headers).toEqual({ 'Retry-After': String(SHED_RETRY_AFTER_SECONDS) });
    expect(limit.shedProblem()).toBe(problem);
  });
});
