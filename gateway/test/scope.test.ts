import { requestTarget, type RequestTarget } from '@app/shared/platform/request-target';
import { CacheScopes, generationKeyOfHold } from '../src/cache/scope.js';

/** The cache scopes and route labels of the services behind the gateway, from their request targets. */
const ID = '0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b';
const upstream = (name: string, cachedReads: boolean) => ({ name, url: `http://127.0.0.1/${name}`, prefix: `/api/${name}`, cachedReads });
const scopes = new CacheScopes([upstream('users', true), upstream('products', true), upstream('audit', false)]);

function target(url: string): RequestTarget {
  const parsed = requestTarget(url);
  if (!parsed) throw new Error(`${url} has no canonical form`);
  return parsed;
}

describe('CacheScopes.read', () => {
  it('reads a list page under the list generation and hold', () => {
    expect(scopes.read(target('/api/users'))).toEqual({ entryKey: 'c:{users}:', generationKey: 'g:{users}', holdKey: 'h:{users}' });
  });

  it('reads an item under its own generation and hold, in the same hash slot as its entry', () => {
    expect(scopes.read(target(`/api/products/${ID}`))).toEqual({
      entryKey: `c:{products:${ID}}:`,
      generationKey: `g:{products:${ID}}`,
      holdKey: `h:{products:${ID}}`,
    });
  });

  it('makes one entry of every order of the same query parameters', () => {
    const entry = (url: string) => scopes.read(target(url))?.entryKey;
    expect(entry('/api/users?b=2&a=1')).toBe('c:{users}:a=1&b=2');
    expect(entry('/api/users?a=1&b=2')).toBe('c:{users}:a=1&b=2');
    // Repeated names keep both values, ordered by value.
    expect(entry('/api/users?tag=z&tag=a')).toBe(entry('/api/users?tag=a&tag=z'));
    expect(entry('/api/users?a=1')).not.toBe(entry('/api/users?a=2'));
  });

  it('caches nothing of a service without cachedReads, of an unknown resource or outside /api', () => {
    expect(scopes.read(target('/api/audit'))).toBeUndefined();
    expect(scopes.read(target(`/api/audit/${ID}`))).toBeUndefined();
    expect(scopes.read(target('/api/orders'))).toBeUndefined();
    expect(scopes.read(target('/healthz'))).toBeUndefined();
  });
});

describe('CacheScopes.written', () => {
  it('renews the list pages for a write to the list', () => {
    expect(scopes.written(target('/api/users'))).toEqual([{ generationKey: 'g:{users}', holdKey: 'h:{users}' }]);
  });

  it('renews the list pages and the item for a write to an item', () => {
    expect(scopes.written(target(`/api/users/${ID}`))).toEqual([
      { generationKey: 'g:{users}', holdKey: 'h:{users}' },
      { generationKey: `g:{users:${ID}}`, holdKey: `h:{users:${ID}}` },
    ]);
  });

  it('renews nothing for an uncached service, an unknown resource, a path outside /api or no target', () => {
    expect(scopes.written(target(`/api/audit/${ID}`))).toEqual([]);
    expect(scopes.written(target('/api/orders'))).toEqual([]);
    expect(scopes.written(target('/metrics'))).toEqual([]);
    expect(scopes.written(undefined)).toEqual([]);
  });
});

describe('CacheScopes.route', () => {
  it('labels a list and an item of every upstream, cached or not', () => {
    expect(scopes.route(target('/api/users?limit=5'))).toBe('/api/users');
    expect(scopes.route(target(`/api/users/${ID}`))).toBe('/api/users/{id}');
    expect(scopes.route(target(`/api/audit/${ID}`))).toBe('/api/audit/{id}');
  });

  it('has no label for an unknown resource, a path outside /api or no target', () => {
    expect(scopes.route(target('/api/orders'))).toBeUndefined();
    expect(scopes.route(target('/docs'))).toBeUndefined();
    expect(scopes.route(undefined)).toBeUndefined();
  });
});

describe('generationKeyOfHold', () => {
  it('names the generation of the scope a hold belongs to', () => {
    expect(generationKeyOfHold('h:{users}')).toBe('g:{users}');
    expect(generationKeyOfHold(`h:{users:${ID}}`)).toBe(`g:{users:${ID}}`);
    for (const { holdKey, generationKey } of scopes.written(target(`/api/products/${ID}`))) expect(generationKeyOfHold(holdKey)).toBe(generationKey);
  });

  it('is undefined for a key that is not a hold', () => {
    expect(generationKeyOfHold('g:{users}')).toBeUndefined();
    expect(generationKeyOfHold('c:{users}:')).toBeUndefined();
  });
});
