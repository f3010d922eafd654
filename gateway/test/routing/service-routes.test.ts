import { requestTarget, type RequestTarget } from '@app/shared/platform/request-target';
import { generationKeyOfHold } from '../../src/cache/keys.js';
import { Routing } from '../../src/routing/service-routes.js';

/** Where each request goes and what it touches: its service, route label, scope and cache keys. */
const ID = '0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b';
const upstream = (name: string, cachedReads: boolean, publicReads = false, owner: 'none' | 'writes' | 'all' = 'none') => ({
  name,
  url: `http://127.0.0.1/${name}`,
  prefix: `/api/${name}`,
  cachedReads,
  publicReads,
  owner,
});
const routing = new Routing([upstream('users', true), upstream('products', true, true), upstream('audit', false), upstream('notes', true, false, 'all'), upstream('reviews', true, false, 'writes')]);

function target(url: string): RequestTarget {
  const parsed = requestTarget(url);
  if (!parsed) throw new Error(`${url} has no canonical form`);
  return parsed;
}

/** What the service routing names for a target says of it: undefined or none when no service serves it. */
const readKeying = (of: RequestTarget, caller?: string) => {
  const scope = routing.service(of)?.readKeying(of, caller);
  // Its keys, read: the generation and hold keys are made on first use.
  return scope && { entryKey: scope.entryKey, generationKey: scope.generationKey, holdKey: scope.holdKey };
};
const writtenKeyings = (of: RequestTarget | undefined) => (of && routing.service(of)?.writtenKeyings(of)) ?? [];

describe('Routing.service', () => {
  it('names the upstream of a list and an item by its resource', () => {
    expect(routing.service(target('/api/users'))?.upstream.name).toBe('users');
    expect(routing.service(target(`/api/audit/${ID}`))?.upstream.name).toBe('audit');
  });

  it('has none for an unknown resource, a path outside /api or no target', () => {
    expect(routing.service(target('/api/orders'))).toBeUndefined();
    expect(routing.service(target('/healthz'))).toBeUndefined();
    expect(routing.service(undefined)).toBeUndefined();
  });
});

describe('ServiceRoute.readKeying', () => {
  it('reads a list page under the list generation and hold', () => {
    expect(readKeying(target('/api/users'))).toEqual({ entryKey: 'c:{users}:', generationKey: 'g:{users}', holdKey: 'h:{users}' });
  });

  it('reads an item under its own generation and hold, in the same hash slot as its entry', () => {
    expect(readKeying(target(`/api/products/${ID}`))).toEqual({
      entryKey: `c:{products:${ID}}:`,
      generationKey: `g:{products:${ID}}`,
      holdKey: `h:{products:${ID}}`,
    });
  });

  it("keeps each caller's own entries where records are seen only by their owners, under the shared generation", () => {
    expect(readKeying(target(`/api/notes/${ID}?a=1`), 'alice')).toEqual({ entryKey: `c:{notes:${ID}}:a=1 alice`, generationKey: `g:{notes:${ID}}`, holdKey: `h:{notes:${ID}}` });
    expect(readKeying(target('/api/notes'), 'bob')?.entryKey).toBe('c:{notes}: bob');
    expect(readKeying(target('/api/notes'))?.entryKey).toBe('c:{notes}: ');
    // Elsewhere one entry serves every caller.
    expect(readKeying(target('/api/reviews'), 'alice')?.entryKey).toBe('c:{reviews}:');
    expect(readKeying(target('/api/users'), 'alice')?.entryKey).toBe('c:{users}:');
  });

  it('names each service its admin scope', () => {
    expect(routing.service(target('/api/notes'))?.adminScope).toBe('notes:admin');
  });

  it('makes one entry of every order of the same query parameters', () => {
    const entry = (url: string) => readKeying(target(url))?.entryKey;
    expect(entry('/api/users?b=2&a=1')).toBe('c:{users}:a=1&b=2');
    expect(entry('/api/users?a=1&b=2')).toBe('c:{users}:a=1&b=2');
    // Repeated names keep both values, ordered by value.
    expect(entry('/api/users?tag=z&tag=a')).toBe(entry('/api/users?tag=a&tag=z'));
    expect(entry('/api/users?a=1')).not.toBe(entry('/api/users?a=2'));
    // Names first, then values, whatever order they came in.
    expect(entry('/api/users?b=1&a=2')).toBe('c:{users}:a=2&b=1');
    for (const query of ['tag=m&tag=z&tag=a', 'tag=z&tag=a&tag=m', 'tag=a&tag=z&tag=m', 'tag=z&tag=m&tag=a']) {
      expect(entry(`/api/users?${query}`)).toBe('c:{users}:tag=a&tag=m&tag=z');
    }
  });

  it('caches nothing of a service without cachedReads, of an unknown resource or outside /api', () => {
    expect(readKeying(target('/api/audit'))).toBeUndefined();
    expect(readKeying(target(`/api/audit/${ID}`))).toBeUndefined();
    expect(readKeying(target('/api/orders'))).toBeUndefined();
    expect(readKeying(target('/healthz'))).toBeUndefined();
  });
});

describe('ServiceRoute.writtenKeyings', () => {
  it('renews the list pages for a write to the list', () => {
    expect(writtenKeyings(target('/api/users'))).toEqual([{ generationKey: 'g:{users}', holdKey: 'h:{users}' }]);
  });

  it('renews the list pages and the item for a write to an item', () => {
    expect(writtenKeyings(target(`/api/users/${ID}`))).toEqual([
      { generationKey: 'g:{users}', holdKey: 'h:{users}' },
      { generationKey: `g:{users:${ID}}`, holdKey: `h:{users:${ID}}` },
    ]);
  });

  it('renews nothing for an uncached service, an unknown resource, a path outside /api or no target', () => {
    expect(writtenKeyings(target(`/api/audit/${ID}`))).toEqual([]);
    expect(writtenKeyings(target('/api/orders'))).toEqual([]);
    expect(writtenKeyings(target('/metrics'))).toEqual([]);
    expect(writtenKeyings(undefined)).toEqual([]);
  });
});

describe('Routing.label', () => {
  it('labels a list and an item of every upstream, cached or not', () => {
    expect(routing.label(target('/api/users?limit=5'))).toBe('/api/users');
    expect(routing.label(target(`/api/users/${ID}`))).toBe('/api/users/{id}');
    expect(routing.label(target(`/api/audit/${ID}`))).toBe('/api/audit/{id}');
  });

  it('has no label for an unknown resource, a path outside /api or no target', () => {
    expect(routing.label(target('/api/orders'))).toBeUndefined();
    expect(routing.label(target('/docs'))).toBeUndefined();
    expect(routing.label(undefined)).toBeUndefined();
  });
});

describe('generationKeyOfHold', () => {
  it('names the generation of the scope a hold belongs to', () => {
    expect(generationKeyOfHold('h:{users}')).toBe('g:{users}');
    expect(generationKeyOfHold(`h:{users:${ID}}`)).toBe(`g:{users:${ID}}`);
    for (const { holdKey, generationKey } of writtenKeyings(target(`/api/products/${ID}`))) expect(generationKeyOfHold(holdKey)).toBe(generationKey);
  });

  it('is undefined for a key that is not a hold', () => {
    expect(generationKeyOfHold('g:{users}')).toBeUndefined();
    expect(generationKeyOfHold('c:{users}:')).toBeUndefined();
  });
});

const scopeOf = (method: string, url: string) => routing.service(requestTarget(url))?.requiredScope(method);

describe('ServiceRoute.requiredScope', () => {
  it('asks <resource>:read for GET and HEAD of a list or an item', () => {
    expect(scopeOf('GET', '/api/users')).toBe('users:read');
    expect(scopeOf('HEAD', `/api/users/${ID}`)).toBe('users:read');
    expect(scopeOf('GET', '/api/users?limit=1')).toBe('users:read');
  });

  it('asks <resource>:write for every other method', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'TRACE']) expect(scopeOf(method, `/api/users/${ID}`)).toBe('users:write');
    expect(scopeOf('POST', '/api/products')).toBe('products:write');
  });

  it('asks nothing for OPTIONS', () => {
    expect(scopeOf('OPTIONS', '/api/users')).toBeUndefined();
  });

  it('asks nothing to read a public resource, but still asks to write it', () => {
    expect(scopeOf('GET', '/api/products')).toBeUndefined();
    expect(scopeOf('HEAD', `/api/products/${ID}`)).toBeUndefined();
    expect(scopeOf('DELETE', `/api/products/${ID}`)).toBe('products:write');
  });

  it('asks the scopes of a served resource whose reads are not cached', () => {
    expect(scopeOf('GET', '/api/audit')).toBe('audit:read');
  });

  it('asks nothing for targets no upstream serves: they are 404s', () => {
    expect(scopeOf('GET', '/api/orders')).toBeUndefined();
    expect(scopeOf('POST', '/api/orders')).toBeUndefined();
    expect(scopeOf('GET', '/healthz')).toBeUndefined();
    expect(routing.service(undefined)?.requiredScope('GET')).toBeUndefined();
  });
});
