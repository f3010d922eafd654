/**
 * The pure parts of `npm run bench:attacks` (bench/attack-stats.ts): its settings, the cursors and
 * bodies its attacks send, and the verdict on each bound of issue 44's "Done when".
 */
import { spawnSync } from 'node:child_process';
import { UUID_V7 } from '@app/shared/platform/request-target';
import {
  attacksOf,
  bigDescription,
  BOUNDS,
  connectionsWithin,
  freshCursor,
  missedBounds,
  openFilesLimit,
  reportLines,
  settingsFrom,
  summariseReads,
  uuidV7At,
  verdictsOf,
  zerosArray,
  type Observed,
} from '../../bench/attack-stats.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

describe('settings', () => {
  test('the defaults are the attacks of the issue, at its sizes', () => {
    const settings = settingsFrom({});
    expect(settings.attacks).toEqual(['pages', 'connections', 'metrics-body', 'invalid-bodies']);
    expect(settings.afterSeconds).toBe(30);
    expect(settings.pages.products).toBe(400);
    expect(settings.connections.count).toBe(12_000);
    expect(settings.invalidBodies).toEqual({ perSecond: 27, seconds: 16, elements: 50_000 });
  });

  test('each count is read from its variable', () => {
    const settings = settingsFrom({ ATTACKS: 'invalid-bodies,pages', ATTACK_AFTER_SECONDS: '5', ATTACK_CONNECTIONS: '300', ATTACK_METRICS_SECONDS: '7' });
    expect(settings.attacks).toEqual(['pages', 'invalid-bodies']);
    expect(settings.afterSeconds).toBe(5);
    expect(settings.connections.count).toBe(300);
    expect(settings.metricsBody.seconds).toBe(7);
  });

  test.each([
    ['ATTACKS', 'pages,slowloris', 'ATTACKS must be a comma-separated list of'],
    ['ATTACKS', '', 'ATTACKS must be a comma-separated list of'],
    ['ATTACK_CONNECTIONS', '0', 'ATTACK_CONNECTIONS must be a whole number of at least 1, not "0"'],
    ['ATTACK_AFTER_SECONDS', 'half a minute', 'ATTACK_AFTER_SECONDS must be a whole number of at least 1'],
  ])('%s=%j is refused, naming the variable', (name, value, message) => {
    expect(() => settingsFrom({ [name]: value })).toThrow(message);
  });

  test('the bench stops at a refused setting before it starts anything', () => {
    const run = spawnSync(process.execPath, ['bench/attacks.ts'], { cwd: ROOT, encoding: 'utf8', timeout: 20_000, env: { ...process.env, ATTACK_PAGES_SECONDS: '0' } });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('ATTACK_PAGES_SECONDS must be a whole number of at least 1, not "0"');
    expect(run.stdout).toBe('');
  });

  test('attacksOf keeps the order of the issue', () => {
    expect(attacksOf('metrics-body,connections')).toEqual(['connections', 'metrics-body']);
  });
});

describe('the open-file limit', () => {
  const limits = (soft: string, hard: string) => `Limit                     Soft Limit           Hard Limit           Units\nMax open files            ${soft.padEnd(21)}${hard.padEnd(21)}files\n`;

  test('is the soft limit of /proc/<pid>/limits', () => {
    expect(openFilesLimit(limits('1024', '20000'))).toBe(1024);
    expect(openFilesLimit(limits('unlimited', 'unlimited'))).toBeUndefined();
  });

  test('cuts the held connections to what it leaves, never below none', () => {
    expect(connectionsWithin(12_000, 20_000)).toBe(12_000);
    expect(connectionsWithin(12_000, 4_096)).toBe(3_596);
    expect(connectionsWithin(12_000, 100)).toBe(0);
    expect(connectionsWithin(12_000, undefined)).toBe(12_000);
  });
});

describe('what the attacks send', () => {
  test('a UUIDv7 of the given millisecond, with fresh random bits each time', () => {
    const ms = Date.UTC(2026, 11, 7);
    const [a, b] = [uuidV7At(ms), uuidV7At(ms)];
    expect(a).toMatch(UUID_V7);
    expect(a).not.toBe(b);
    expect(parseInt(a.replaceAll('-', '').slice(0, 12), 16)).toBe(ms);
  });

  test('a fresh cursor is a UUIDv7 in base64url, before any id made after its millisecond', () => {
    const ms = Date.now() - 1_000;
    const id = Buffer.from(freshCursor(ms), 'base64url').toString('latin1');
    expect(id).toMatch(UUID_V7);
    expect(id < uuidV7At(ms + 1)).toBe(true);
  });

  test('a big description is 5,000 characters the API takes, of 4 bytes each', () => {
    const description = bigDescription(5_000);
    expect([...description]).toHaveLength(5_000);
    expect(Buffer.byteLength(description)).toBe(20_000);
    expect(description.isWellFormed()).toBe(true);
    expect(bigDescription(5_000)).not.toBe(description);
  });

  test('the invalid body is an array of 50,000 zeros, about 100 KB', () => {
    const body = zerosArray(50_000);
    expect(body).toHaveLength(100_001);
    const parsed = JSON.parse(body) as number[];
    expect(parsed).toHaveLength(50_000);
    expect(parsed.every((n) => n === 0)).toBe(true);
  });
});

describe('the verdicts', () => {
  const reads = (...ms: number[]) => summariseReads(ms.map((n) => ({ ms: n, status: 200 })));
  const within: Observed = { rssStartMiB: 120, rssPeakMiB: BOUNDS.peakRssMiB, rssAfterMiB: 120 + BOUNDS.returnMiB, lagP99Ms: BOUNDS.lagP99Ms, reads: reads(3, BOUNDS.slowReadMs), running: true };

  test('the normal client: its p50, max, reads over a second, and reads not answered with 2xx', () => {
    const summary = summariseReads([
      { ms: 3, status: 200 },
      { ms: 1_000, status: 200 },
      { ms: 1_000.4, status: 503 },
      { ms: 30_000, status: 'error' },
    ]);
    expect(summary).toEqual({ count: 4, p50Ms: 1_000, maxMs: 30_000, overBound: 2, failed: 2 });
  });

  test('every bound holds at its limit', () => {
    expect(verdictsOf(within).every((v) => v.pass)).toBe(true);
    expect(missedBounds([{ name: 'pages', observed: within }])).toEqual([]);
  });

  test.each([
    ['RSS ≤ 200 MiB throughout', 'a peak 0.1 MiB over', { rssPeakMiB: BOUNDS.peakRssMiB + 0.1 }],
    ['RSS back within 32 MiB of its start', 'an RSS after 0.1 MiB over', { rssAfterMiB: 120 + BOUNDS.returnMiB + 0.1 }],
    ['event-loop lag p99 ≤ 100 ms', 'a p99 0.01 ms over', { lagP99Ms: BOUNDS.lagP99Ms + 0.01 }],
    ['event-loop lag p99 ≤ 100 ms', 'no answer from the probe', { lagP99Ms: undefined }],
    ['normal client: 0 reads over 1 s', 'one read 1 ms over', { reads: reads(3, BOUNDS.slowReadMs + 1) }],
    ['normal client: 0 reads over 1 s', 'no reads at all', { reads: reads() }],
    ['the gateway still running', 'a gateway that exited', { running: false }],
  ])('%s is missed by %s alone', (bound, _, change) => {
    const observed = { ...within, ...change };
    expect(verdictsOf(observed).filter((v) => !v.pass).map((v) => v.bound)).toEqual([bound]);
    expect(missedBounds([{ name: 'connections', observed }])).toEqual([`connections: ${bound}`]);
  });

  test('the report says what was seen and each verdict', () => {
    const lines = reportLines('metrics-body', '10 to open', { ...within, lagP99Ms: undefined }, 30);
    expect(lines[0]).toBe('metrics-body (a slow metrics body): 10 to open');
    expect(lines).toContain('  RSS: start 120 MiB, peak 200 MiB, 30 s after 152 MiB');
    expect(lines).toContain('  event-loop lag p99: no answer from the probe');
    expect(lines).toContain('  FAIL  event-loop lag p99 ≤ 100 ms');
    expect(lines).toContain('  PASS  RSS ≤ 200 MiB throughout');
  });
});
