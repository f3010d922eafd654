import { requestTarget } from '@app/shared/platform/request-target';
import { v7 as uuidv7 } from 'uuid';

const id = uuidv7();

describe('requestTarget', () => {
  it('reads the canonical API paths: a list, an item, with their query as it came', () => {
    expect(requestTarget('/api/products')).toEqual({ path: '/api/products', query: '', url: '/api/products', api: { resource: 'products' } });
    expect(requestTarget(`/api/users/${id}?b=2&a=1`)).toEqual({
      path: `/api/users/${id}`,
      query: 'b=2&a=1',
      url: `/api/users/${id}?b=2&a=1`,
      api: { resource: 'users', id },
    });
  });

  it('reads an absolute-form target as its path and query', () => {
    expect(requestTarget(`http://gateway:8080/api/products/${id}`)?.url).toBe(`/api/products/${id}`);
    expect(requestTarget('HTTPS://gateway/api/users?limit=1')?.url).toBe('/api/users?limit=1');
    expect(requestTarget('http://gateway?x=1')?.url).toBe('/?x=1');
    expect(requestTarget('http://gateway')?.url).toBe('/');
    expect(requestTarget('HTTP://gateway/api/users')?.url).toBe('/api/users');
  });

  it('reads every lower-case letter in a resource name, a to z', () => {
    expect(requestTarget('/api/abcdefghijklmnopqrstuvwxyz')?.api).toEqual({ resource: 'abcdefghijklmnopqrstuvwxyz' });
  });

  it('keeps the spelling of paths outside /api', () => {
    // '/%E0%A4%A': a percent-encoding that decodes to nothing, so it cannot spell `api`.
    for (const path of ['/', '/healthz', '/docs/', '/docs/swagger-ui.css', '/openapi.json', '/apiary', '/metrics?x=1', '/%E0%A4%A']) {
      expect(requestTarget(path)?.url).toBe(path);
      expect(requestTarget(path)?.api).toBeUndefined();
    }
  });

  it('finds no canonical form for any other spelling of an API path', () => {
    const spellings = [
      '/api',
      '/api/',
      '/api/products/',
      `/api/products/${id}/`,
      `/api//products/${id}`,
      `//api/products/${id}`,
      `/api/products//${id}`,
      `/api/products/./${id}`,
      `/api/products/x/../${id}`,
      `/./api/products/${id}`,
      `/%2e%2e/api/products/${id}`,
      `/api/products/%2E/${id}`,
      `/api/products/%${id.charCodeAt(0).toString(16)}${id.slice(1)}`,
      `/api/products%2F${id}`,
      `/api/products/${id}%2F`,
      '/api/%70roducts',
      '/%61pi/products',
      '/%61%70%69/products',
      `/%2e/api/products/${id}`,
      '/API',
      '/API/products',
      `/api\\products/${id}`,
      `http://gateway/api\\products/${id}`,
      '/Api/products',
      '/api/Products',
      `/api/products/${id.toUpperCase()}`,
      `/api/products/${id};v=1`,
      '/api/products;v=1',
      `/api/products/${id}#top`,
      '/api/products#',
      '/api/products/not-a-uuid',
      `/api/products/${id}/more`,
      '/api/pro-ducts',
      '/api/produçts',
      '*',
      'mailto:someone',
      'x-http://gateway/healthz',
    ];
    for (const spelling of spellings) expect({ spelling, target: requestTarget(spelling) }).toEqual({ spelling, target: undefined });
  });

  it('gives the canonical form back unchanged: it is its own canonical form', () => {
    for (const url of ['/api/users', `/api/products/${id}?limit=1&cursor=x`, '/healthz']) expect(requestTarget(requestTarget(url)!.url)?.url).toBe(url);
  });

  it('decides long hostile targets', () => {
    expect(requestTarget(`/api/products/${'%2e/'.repeat(20_000)}${'a'.repeat(100_000)}`)).toBeUndefined();
    expect(requestTarget(`/${'/'.repeat(100_000)}api`)).toBeUndefined();
    expect(requestTarget(`/${'%41'.repeat(100_000)}`)?.api).toBeUndefined();
  });
});
