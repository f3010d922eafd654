import type { CachedResponse } from '../../src/cache/entry.js';
import { byteBounds, entrySize, generationSize, stringBytes } from '../../src/cache/memory-tier/held-bytes.js';
import { heldEntry } from '../../src/cache/memory-tier/held-entry.js';
import { HeldStore } from '../../src/cache/memory-tier/held-store.js';

/** What the memory tier holds, and what it counts it as: no Redis, no tracking. */
const response = (generation: string, body = Buffer.from('{}')): CachedResponse => ({ generation, storedAt: 0, status: 200, headers: { 'content-type': 'application/json' }, body });

describe('the bytes held', () => {
  it('give the generations a quarter of the tier and the entries the rest, each at least a byte', () => {
    expect(byteBounds(1_000)).toEqual({ entries: 750, generations: 250 });
    expect(byteBounds(1_001)).toEqual({ entries: 751, generations: 250 });
    expect(byteBounds(1)).toEqual({ entries: 1, generations: 1 });
  });

  it('count a character a byte, two once any is beyond Latin-1', () => {
    expect(stringBytes('')).toBe(0);
    expect(stringBytes('abc')).toBe(3);
    expect(stringBytes('é\u00ff')).toBe(2);
    expect(stringBytes('a€')).toBe(4);
    expect(stringBytes('a\u0100')).toBe(4);
  });

  it('count an entry by its key, generation key, generation, headers and body, and each variant', () => {
    const entry = heldEntry({ ...response('g1', Buffer.alloc(10)), headers: { a: 'bc' } }, 'g:{x}');
    // 512 of overhead, the key (1), the generation key (5), the generation (2), the body (10) and a header (16 + 1 + 2).
    expect(entrySize('k', entry)).toBe(512 + 1 + 5 + 2 + 10 + 19);
    expect(entrySize('k€', entry)).toBe(entrySize('k', entry) + 3);
    const withVariant = heldEntry({ ...entry, variants: { br: { headers: { a: 'bc' }, body: Buffer.alloc(4) } } }, 'g:{x}');
    expect(entrySize('k', withVariant)).toBe(entrySize('k', entry) + 512 + 4 + 19);
  });

  it('count a generation by its key and value', () => {
    expect(generationSize('g:{x}', 'g1')).toBe(160 + 5 + 2);
    expect(generationSize('g:{€}', 'g1')).toBe(160 + 10 + 2);
  });
});

describe('an entry as held', () => {
  it('has every body in a buffer of its own, the header lists made, the generation key its own', () => {
    const parent = Buffer.alloc(8 * 1024, 'x');
    const variants = { gzip: { headers: { 'content-encoding': 'gzip' }, body: parent.subarray(16, 20) } };
    const held = heldEntry({ ...response('g1', parent.subarray(0, 16)), variants }, 'g:{x}');
    expect(held.body.equals(parent.subarray(0, 16))).toBe(true);
    expect(held.body.buffer.byteLength).toBe(16);
    expect(held.headerList).toEqual(['content-type', 'application/json']);
    expect(held.generationKey).toBe('g:{x}');
    expect(held.variants).toEqual({ gzip: { headers: variants.gzip.headers, body: Buffer.from('xxxx'), headerList: ['content-encoding', 'gzip'] } });
    expect(held.variants!.gzip!.body.buffer.byteLength).toBe(4);
    expect(Object.keys(held.variants!)).toEqual(['gzip']);
  });

  it('has no variants when the response has none', () => {
    expect(heldEntry(response('g1'), 'g:{x}').variants).toBeUndefined();
  });
});

describe('the held store', () => {
  const store = () => new HeldStore(64 * 1024);

  it('gives an entry only while its generation is the one known current', () => {
    const held = store();
    held.keep('c:{x}', heldEntry(response('g1'), 'g:{x}'));
    expect(held.current('c:{x}')).toBeUndefined();
    held.endRead(held.watch('g:{x}'), 'g1');
    expect(held.generation('g:{x}')).toBe('g1');
    expect(held.current('c:{x}')?.generation).toBe('g1');
    held.endRead(held.watch('g:{x}'), 'g2');
    expect(held.current('c:{x}')).toBeUndefined();
    expect(held.current('c:{other}')).toBeUndefined();
  });

  it('installs what a read found unless an invalidation of its scope or a new session came meanwhile', () => {
    const held = store();
    const spoilt = held.watch('g:{x}');
    const other = held.watch('g:{y}');
    held.forgetTag('g:{x}');
    held.endRead(spoilt, 'g1');
    held.endRead(other, 'g1');
    expect(held.generation('g:{x}')).toBeUndefined();
    expect(held.generation('g:{y}')).toBe('g1');

    const before = held.watch('g:{z}');
    held.forgetAll();
    held.endRead(before, 'g1');
    expect(held.generation('g:{z}')).toBeUndefined();
    expect(held.generation('g:{y}')).toBeUndefined();
    held.endRead(held.watch('g:{z}'), null);
    expect(held.generation('g:{z}')).toBeUndefined();
  });

  it('spoils every read of a scope under way, not the ones sent after the invalidation', () => {
    const held = store();
    const first = held.watch('g:{x}');
    const second = held.watch('g:{x}');
    held.forgetTag('g:{x}');
    const after = held.watch('g:{x}');
    held.endRead(first, 'g1');
    held.endRead(second, 'g1');
    expect(held.generation('g:{x}')).toBeUndefined();
    held.endRead(after, 'g2');
    expect(held.generation('g:{x}')).toBe('g2');
  });

  it('forgets a scope and everything on demand, and counts what it holds within its bytes', () => {
    const held = new HeldStore(8 * 1024);
    expect(held.heldBytes).toBe(0);
    held.endRead(held.watch('g:{x}'), 'g1');
    held.keep('c:{x}', heldEntry(response('g1'), 'g:{x}'));
    expect(held.heldBytes).toBe(generationSize('g:{x}', 'g1') + entrySize('c:{x}', heldEntry(response('g1'), 'g:{x}')));
    held.forgetTag('g:{x}');
    expect(held.current('c:{x}')).toBeUndefined();
    for (let n = 0; n < 100; n++) held.keep(`c:{${n}}`, heldEntry(response('g1'), 'g:{x}'));
    expect(held.heldBytes).toBeLessThanOrEqual(8 * 1024);
    held.forgetAll();
    expect(held.heldBytes).toBe(0);
  });
});
