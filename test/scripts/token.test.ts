import { execFileSync, spawnSync } from 'node:child_process';
import { decodeJwt } from 'jose';
import { GATEWAY_ADMIN_SCOPE, readServiceList } from '@app/shared/platform/services';

const ROOT = new URL('../..', import.meta.url).pathname;

/** `npm run token -- …` as an operator runs it: the token alone on stdout. */
const token = (...args: string[]) => execFileSync(process.execPath, ['scripts/token.ts', ...args], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();

describe('npm run token', () => {
  it("grants every listed service's admin scope when asked, and its read and write by default", () => {
    for (const { scopes } of readServiceList()) {
      expect(String(decodeJwt(token('--scope', scopes.admin, '--sub', 'root')).scope).split(' ')).toEqual([scopes.admin]);
    }
    const granted = String(decodeJwt(token()).scope).split(' ');
    expect(granted).toEqual(readServiceList().flatMap(({ scopes }) => [scopes.read, scopes.write]));
  });

  it('adds every admin scope, the gateway\'s included, with --admin, and says so in --help', () => {
    const services = readServiceList();
    const admin = [...services.map(({ scopes }) => scopes.admin), GATEWAY_ADMIN_SCOPE];
    expect(String(decodeJwt(token('--admin')).scope).split(' ')).toEqual([...services.flatMap(({ scopes }) => [scopes.read, scopes.write]), ...admin]);
    expect(String(decodeJwt(token('--admin', '--scope', services[0]!.scopes.read)).scope).split(' ')).toEqual([services[0]!.scopes.read, ...admin]);
    expect(token('--help')).toMatch(new RegExp(`--admin .*${admin.join(', ')}`));
  });

  it('refuses a scope no service has, naming it', () => {
    const refused = spawnSync(process.execPath, ['scripts/token.ts', '--scope', 'orders:admin'], { cwd: ROOT, encoding: 'utf8' });
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain('unknown scopes: orders:admin');
  });
});
