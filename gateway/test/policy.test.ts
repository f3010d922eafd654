import { requestTarget } from '@app/shared/platform/request-target';
import { AccessPolicy } from '../src/auth/policy.js';
import { CacheScopes } from '../src/cache/scope.js';

/** The scope each request needs, from its method and canonical target. */
const ID = '0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b';
const upstream = (name: string) => ({ name, url: `http://127.0.0.1/${name}`, prefix: `/api/${name}`, cachedReads: name !== 'audit' });
const routes = new CacheScopes([upstream('users'), upstream('products'), upstream('audit')]);
const policy = new AccessPolicy(routes, new Set(['products']));
const scopeOf = (method: string, url: string) => policy.requiredScope(method, requestTarget(url));

describe('AccessPolicy.requiredScope', () => {
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
    expect(policy.requiredScope('GET', undefined)).toBeUndefined();
  });
});
