import type { Logger } from '@app/shared/platform/logger';
import {
  containerMemoryLimitBytes,
  COOL_DOWN_MS,
  DEFAULT_MEMORY_LIMIT_BYTES,
  OverloadManager,
  overloadConfigProblems,
  overloadSettings,
  type MemoryReading,
} from '../../src/load-shedding/overload.js';

/** The overload manager's level from injected memory readings and clock: no timer, no real memory. */
const MB = 1024 * 1024;

function manager() {
  let reading: MemoryReading = { rssBytes: 0, heapUsedBytes: 0, heapLimitBytes: 100 * MB };
  let now = 1_000_000;
  const logged: { level: string; message: string }[] = [];
  const record = (level: string) => (_details: object, message: string) => void logged.push({ level, message });
  const logger = { warn: record('warn'), info: record('info') } as unknown as Logger;
  const overload = new OverloadManager({ limitBytes: 200 * MB, thresholds: [0.8, 0.9, 0.95] }, { logger, read: () => reading, now: () => now });
  return {
    overload,
    logged,
    /** Sets RSS to `share` of the 200 MB limit (the heap at none) and samples. */
    rssAt(share: number) {
      reading = { ...reading, rssBytes: share * 200 * MB, heapUsedBytes: 0 };
      overload.sample();
      return overload.level;
    },
    heapAt(share: number) {
      reading = { ...reading, rssBytes: 0, heapUsedBytes: share * reading.heapLimitBytes };
      overload.sample();
      return overload.level;
    },
    advance: (ms: number) => (now += ms),
  };
}

describe('OverloadManager', () => {
  it('takes the level of the highest threshold the RSS passed, at the sample that passes it', () => {
    const { rssAt, overload } = manager();
    expect(rssAt(0.79)).toBe(0);
    expect(overload.storesNothing).toBe(false);
    expect(rssAt(0.8)).toBe(1);
    expect(overload.storesNothing).toBe(false);
    expect(rssAt(0.9)).toBe(2);
    expect(overload.storesNothing).toBe(true);
    expect(rssAt(0.96)).toBe(3);
  });

  it('judges the V8 heap against its own limit as well', () => {
    const { heapAt } = manager();
    expect(heapAt(0.5)).toBe(0);
    expect(heapAt(0.91)).toBe(2);
  });

  it('jumps straight to the level the pressure calls for', () => {
    expect(manager().rssAt(0.99)).toBe(3);
  });

  it('leaves a level only once the pressure has stayed under it for the cool-down', () => {
    const { rssAt, advance } = manager();
    rssAt(0.96);
    expect(rssAt(0.5)).toBe(3);
    advance(COOL_DOWN_MS - 1);
    expect(rssAt(0.5)).toBe(3);
    advance(1);
    expect(rssAt(0.85)).toBe(1);
  });

  it('starts the cool-down again when the pressure comes back', () => {
    const { rssAt, advance } = manager();
    rssAt(0.96);
    rssAt(0.5);
    advance(COOL_DOWN_MS - 1);
    rssAt(0.97);
    advance(1);
    expect(rssAt(0.5)).toBe(3);
    advance(COOL_DOWN_MS);
    expect(rssAt(0.5)).toBe(0);
  });

  it('logs each change of level once, not each sample', () => {
    const { rssAt, advance, logged } = manager();
    rssAt(0.85);
    rssAt(0.86);
    rssAt(0.96);
    rssAt(0.97);
    rssAt(0.1);
    advance(COOL_DOWN_MS);
    rssAt(0.1);
    rssAt(0.1);
    expect(logged).toEqual([
      { level: 'warn', message: 'memory overload: closing connections' },
      { level: 'warn', message: 'memory overload: shedding' },
      { level: 'info', message: 'memory overload eased: normal' },
    ]);
  });
});

describe('the memory limit', () => {
  const files = (contents: Record<string, string>) => (path: string) => {
    if (path in contents) return contents[path]!;
    throw new Error(`ENOENT ${path}`);
  };
  const machine = 8 * 1024 * MB;

  it('is the container’s: cgroup v2, else v1', () => {
    expect(containerMemoryLimitBytes(files({ '/sys/fs/cgroup/memory.max': '268435456\n' }), machine)).toBe(256 * MB);
    expect(containerMemoryLimitBytes(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '536870912\n' }), machine)).toBe(512 * MB);
  });

  it('is none when the cgroup sets none: `max`, a number no smaller than the machine’s memory, or no cgroup file', () => {
    expect(containerMemoryLimitBytes(files({ '/sys/fs/cgroup/memory.max': 'max\n' }), machine)).toBeUndefined();
    expect(containerMemoryLimitBytes(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n' }), machine)).toBeUndefined();
    expect(containerMemoryLimitBytes(files({}), machine)).toBeUndefined();
  });

  const config = { GATEWAY_MEMORY_LIMIT_MB: 0, OVERLOAD_CLOSE_PERCENT: 80, OVERLOAD_NO_STORE_PERCENT: 90, OVERLOAD_SHED_PERCENT: 95 };

  it('is GATEWAY_MEMORY_LIMIT_MB when set, else the container’s, else 256 MiB (the k8s manifests’)', () => {
    expect(overloadSettings({ ...config, GATEWAY_MEMORY_LIMIT_MB: 300 }, 128 * MB).limitBytes).toBe(300 * MB);
    expect(overloadSettings(config, 128 * MB).limitBytes).toBe(128 * MB);
    expect(overloadSettings(config, undefined)).toEqual({ limitBytes: DEFAULT_MEMORY_LIMIT_BYTES, thresholds: [0.8, 0.9, 0.95] });
    expect(DEFAULT_MEMORY_LIMIT_BYTES).toBe(256 * MB);
  });

  it('has thresholds that rise with the levels', () => {
    expect(overloadConfigProblems(config)).toEqual([]);
    expect(overloadConfigProblems({ ...config, OVERLOAD_NO_STORE_PERCENT: 96 })).toEqual([expect.stringContaining('must not decrease')]);
  });
});
