import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readServiceList, serviceDefaults } from '../src/platform/services.js';

/** A services.json entry's body limit: bounded, optional, and what a service process takes from it. */
let dir: string;
beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'services-'))));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A list of one service, `notes`, with `body` in its entry where given; the file's path. */
function listWith(body?: unknown): string {
  const file = join(dir, `services-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({ services: [{ name: 'notes', port: 3004, cachedReads: true, publicReads: false, owner: 'none', ...(body !== undefined && { body }) }] }));
  return file;
}

const bounds = 'must be a whole number of bytes from 1024 (1 KiB) to 16777216 (16 MiB)';

describe('a service entry’s body limit', () => {
  it('takes a limit from 1 KiB to 16 MiB', () => {
    expect(readServiceList(listWith({ limitBytes: 1024 }))[0]?.body).toEqual({ limitBytes: 1024 });
    expect(readServiceList(listWith({ limitBytes: 16 * 1024 * 1024 }))[0]?.body).toEqual({ limitBytes: 16 * 1024 * 1024 });
  });

  it.each([
    ['under 1 KiB', { limitBytes: 1023 }, `services.0.body.limitBytes: ${bounds}`],
    ['over 16 MiB', { limitBytes: 16 * 1024 * 1024 + 1 }, `services.0.body.limitBytes: ${bounds}`],
    ['not a whole number', { limitBytes: 2048.5 }, `services.0.body.limitBytes: ${bounds}`],
    ['a string', { limitBytes: '100kb' }, `services.0.body.limitBytes: ${bounds}`],
  ])('refuses a limit %s, naming the bounds', (_case, body, message) => {
    const file = listWith(body);
    expect(() => readServiceList(file)).toThrow(`${file}: ${message}`);
  });

  it('refuses a member it does not know', () => {
    expect(() => readServiceList(listWith({ limitBytes: 2048, depth: 4 }))).toThrow(/services\.0\.body: Unrecognized key/);
  });

  it('is what the service process takes, and absent where the entry sets none', () => {
    expect(serviceDefaults('notes', listWith({ limitBytes: 262_144 })).bodyLimitBytes).toBe(262_144);
    expect(serviceDefaults('notes', listWith())).not.toHaveProperty('bodyLimitBytes');
  });
});
