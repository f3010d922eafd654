import { generationKeyOfHold, readKeyingOf, writeKeyingOf } from '../../src/cache/keys.js';

/** The cache's keys for a tag: its entries (one per distinct query), its generation and its hold. */
describe('writeKeyingOf', () => {
  it('names the generation and the hold of a tag, in the tag’s hash slot', () => {
    expect(writeKeyingOf('users')).toEqual({ generationKey: 'g:{users}', holdKey: 'h:{users}' });
    expect(writeKeyingOf('users:1')).toEqual({ generationKey: 'g:{users:1}', holdKey: 'h:{users:1}' });
  });
});

describe('readKeyingOf', () => {
  const entryKey = (query: string) => readKeyingOf('users', query).entryKey;

  it('reads under the same generation and hold as a write of the tag, whichever key is read first', () => {
    const holdFirst = readKeyingOf('products:7', 'a=1');
    expect(holdFirst.holdKey).toBe('h:{products:7}');
    expect(holdFirst.generationKey).toBe('g:{products:7}');
    const generationFirst = readKeyingOf('products:7', 'a=1');
    expect(generationFirst.generationKey).toBe('g:{products:7}');
    expect(generationFirst.holdKey).toBe('h:{products:7}');
    expect(generationFirst.entryKey).toBe('c:{products:7}:a=1');
  });

  it('keys a read without a query by its tag alone', () => {
    expect(entryKey('')).toBe('c:{users}:');
  });

  it('makes one entry of every order of the same parameters, and another of other values', () => {
    expect(entryKey('limit=5&cursor=abc')).toBe(entryKey('cursor=abc&limit=5'));
    expect(entryKey('tag=b&tag=a&tag=c')).toBe(entryKey('tag=c&tag=a&tag=b'));
    expect(entryKey('tag=a&tag=b')).not.toBe(entryKey('tag=a&tag=c'));
    expect(entryKey('a=1&b=2')).not.toBe(entryKey('a=2&b=1'));
  });

  it('makes one entry of every order of names that begin alike', () => {
    const orders = [
      ['a=2', 'a-b=1', 'ab=0', 'a=1'],
      ['a=1', 'ab=0', 'a-b=1', 'a=2'],
      ['ab=0', 'a=2', 'a=1', 'a-b=1'],
      ['a-b=1', 'a=1', 'a=2', 'ab=0'],
    ];
    const keys = new Set(orders.map((order) => entryKey(order.join('&'))));
    expect(keys.size).toBe(1);
  });

  it('keeps a parameter given twice twice', () => {
    expect(entryKey('a=1&a=1')).not.toBe(entryKey('a=1'));
  });

  it('reads the spellings of one value as one entry', () => {
    expect(entryKey('q=a+b')).toBe(entryKey('q=a%20b'));
    expect(entryKey('q=%7E')).toBe(entryKey('q=~'));
  });
});

describe('generationKeyOfHold', () => {
  it('has no generation for a key that is no hold', () => {
    expect(generationKeyOfHold('h{users}')).toBeUndefined();
    expect(generationKeyOfHold('x:{users}')).toBeUndefined();
  });
});
