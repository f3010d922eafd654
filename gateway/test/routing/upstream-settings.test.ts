import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configSchema } from '../../src/config.js';
import { upstreamSettings } from '../../src/routing/upstreams.js';
import { servesPath } from '../../src/routing/service-routes.js';

/** Which upstream serves a path, and the upstreams derived from the service list and the environment. */
describe('servesPath', () => {
  const users = { prefix: '/api/users' };

  it('serves the prefix and everything below it', () => {
    expect(servesPath(users, '/api/users')).toBe(true);
    expect(servesPath(users, '/api/users/')).toBe(true);
    expect(servesPath(users, '/api/users/0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b')).toBe(true);
  });

  it('serves no path that merely starts with the same letters, nor one above it', () => {
    expect(servesPath(users, '/api/usersx')).toBe(false);
    expect(servesPath(users, '/api/user')).toBe(false);
    expect(servesPath(users, '/api')).toBe(false);
    expect(servesPath(users, '/api/products')).toBe(false);
  });
});

describe('upstreamSettings', () => {
  let dir: string;
  let servicesFile: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'upstream-settings-'));
    servicesFile = join(dir, 'services.json');
    writeFileSync(
      servicesFile,
      JSON.stringify({
        services: [
          { name: 'users', port: 3001, cachedReads: true, publicReads: false, owner: 'all' },
          { name: 'products', port: 3002, cachedReads: true, publicReads: true, owner: 'none' },
          { name: 'audit', port: 3003, cachedReads: false, publicReads: false, owner: 'writes' },
        ],
      }),
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The environment as the gateway reads it, with `env` on top of the defaults. */
  const settings = (env: Record<string, string> = {}) => upstreamSettings(configSchema.parse({ SERVICES_FILE: servicesFile, ...env }));

  it('makes one upstream per listed service, at the template URL, with its prefix and kind of reads', () => {
    const { upstreams, problems } = settings({ UPSTREAM_URL_TEMPLATE: 'http://{service}:{port}' });
    expect(problems).toEqual([]);
    expect(upstreams).toEqual([
      { name: 'users', prefix: '/api/users', url: 'http://users-service:3001', cachedReads: true, publicReads: false, owner: 'all' },
      { name: 'products', prefix: '/api/products', url: 'http://products-service:3002', cachedReads: true, publicReads: false, owner: 'none' },
      { name: 'audit', prefix: '/api/audit', url: 'http://audit-service:3003', cachedReads: false, publicReads: false, owner: 'writes' },
    ]);
  });

  it('defaults to each service’s port on the loopback', () => {
    expect(settings().upstreams.map(({ url }) => url)).toEqual(['http://127.0.0.1:3001', 'http://127.0.0.1:3002', 'http://127.0.0.1:3003']);
  });

  it('takes a service’s URL from GATEWAY_UPSTREAMS over the template', () => {
    const { upstreams, problems } = settings({ GATEWAY_UPSTREAMS: 'products=http://10.0.0.5:9000' });
    expect(problems).toEqual([]);
    expect(upstreams.find(({ name }) => name === 'products')?.url).toBe('http://10.0.0.5:9000');
    expect(upstreams.find(({ name }) => name === 'users')?.url).toBe('http://127.0.0.1:3001');
  });

  it('serves reads publicly only for the services AUTH_PUBLIC_READS names', () => {
    const { upstreams, problems } = settings({ AUTH_PUBLIC_READS: 'products' });
    expect(problems).toEqual([]);
    expect(upstreams.filter(({ publicReads }) => publicReads).map(({ name }) => name)).toEqual(['products']);
  });

  it('names each problem that stops the gateway: an unknown service, reads that may not be public', () => {
    const { problems } = settings({ GATEWAY_UPSTREAMS: 'orders=http://10.0.0.6:9000', AUTH_PUBLIC_READS: 'users,billing' });
    expect(problems).toEqual([
      `GATEWAY_UPSTREAMS: orders: no such service in ${servicesFile}`,
      'AUTH_PUBLIC_READS: users: its reads may not be public (services.json)',
      `AUTH_PUBLIC_READS: billing: no such service in ${servicesFile}`,
    ]);
  });

  it('refuses a list that lets everyone read records only their owners may see', () => {
    const file = join(dir, 'public-personal.json');
    writeFileSync(file, JSON.stringify({ services: [{ name: 'notes', port: 3004, cachedReads: true, publicReads: true, owner: 'all' }] }));
    expect(settings({ SERVICES_FILE: file }).problems).toEqual([
      `SERVICES_FILE: ${file}: services.0.publicReads: publicReads must be false where owner is "all": a record is then seen only by its owner`,
    ]);
  });

  it('reports a service list it cannot read, and makes no upstreams', () => {
    const { upstreams, problems } = settings({ SERVICES_FILE: join(dir, 'missing.json') });
    expect(upstreams).toEqual([]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^SERVICES_FILE: /);
  });
});
