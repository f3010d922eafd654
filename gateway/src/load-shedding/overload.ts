import { readFileSync } from 'node:fs';
import os from 'node:os';
import v8 from 'node:v8';
import type { Logger } from '@app/shared/platform/logger';

/** The process's memory now, and how far V8 lets its heap grow (`--max-old-space-size`). */
export interface MemoryReading {
  rssBytes: number;
  heapUsedBytes: number;
  heapLimitBytes: number;
}

export type MemoryReader = () => MemoryReading;

/** Cheap enough for a timer: no heap walk (process.memoryUsage() would add one for its heap fields). */
const readProcessMemory: MemoryReader = () => {
  const heap = v8.getHeapStatistics();
  return { rssBytes: process.memoryUsage.rss(), heapUsedBytes: heap.used_heap_size, heapLimitBytes: heap.heap_size_limit };
};

/**
 * The steps of the overload manager, each doing what the ones before it do and more: no new
 * keep-alive (every response closes its connection), no new cache entries, then new requests
 * refused with 503.
 */
const OVERLOAD_LEVELS = ['normal', 'closing connections', 'storing nothing', 'shedding'] as const;
export type OverloadLevel = 0 | 1 | 2 | 3;
const STORING_NOTHING = 2;
export const SHEDDING = 3;

export interface OverloadSettings {
  /** The memory the process may use: its container's limit, or GATEWAY_MEMORY_LIMIT_MB. */
  limitBytes: number;
  /** The shares of the limit (0–1) at which levels 1, 2 and 3 begin, in that order. */
  thresholds: readonly [number, number, number];
}

/** How often memory is read: often enough to act well before a burst fills the limit, rarely enough to cost nothing per request. */
const SAMPLE_INTERVAL_MS = 250;
/**
 * How long the pressure must stay under a level's threshold before the level is left: a heap swings
 * with each collection, and a level that followed every swing would open and shut the door each time.
 */
export const COOL_DOWN_MS = 2_000;

/** What the response cache asks before it stores a new entry. */
export interface MemoryPressure {
  readonly storesNothing: boolean;
}

/**
 * The gateway's overload manager, after Envoy's: memory read on a timer (never per request), its
 * pressure the larger of RSS over `limitBytes` and the V8 heap over its own limit, and a level from
 * the thresholds that pressure passed. A level is entered at the sample that passes its threshold
 * and left once the pressure has stayed under it for COOL_DOWN_MS; each change is logged once.
 */
export class OverloadManager implements MemoryPressure {
  #level: OverloadLevel = 0;
  /** When the pressure last went under the current level's threshold; undefined while it is above. */
  #calmSince: number | undefined = undefined;
  #timer: NodeJS.Timeout | undefined = undefined;

  constructor(
    readonly settings: OverloadSettings,
    private readonly options: { logger: Logger; read?: MemoryReader; now?: () => number },
  ) {}

  get level(): OverloadLevel {
    return this.#level;
  }

  get storesNothing(): boolean {
    return this.#level >= STORING_NOTHING;
  }

  /** Reads memory now and every SAMPLE_INTERVAL_MS (a timer that keeps no process alive). */
  start(): void {
    this.sample();
    this.#timer ??= setInterval(() => this.sample(), SAMPLE_INTERVAL_MS).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Reads memory once and moves to the level it calls for. */
  sample(): void {
    const reading = (this.options.read ?? readProcessMemory)();
    const pressure = Math.max(reading.rssBytes / this.settings.limitBytes, reading.heapUsedBytes / reading.heapLimitBytes);
    const called = this.settings.thresholds.filter((threshold) => pressure >= threshold).length as OverloadLevel;
    if (called >= this.#level) {
      this.#calmSince = undefined;
      if (called > this.#level) this.#move(called, pressure, reading);
      return;
    }
    const now = (this.options.now ?? Date.now)();
    this.#calmSince ??= now;
    if (now - this.#calmSince >= COOL_DOWN_MS) {
      this.#calmSince = undefined;
      this.#move(called, pressure, reading);
    }
  }

  #move(level: OverloadLevel, pressure: number, reading: MemoryReading): void {
    const rising = level > this.#level;
    this.#level = level;
    const details = { level, pressure: Math.round(pressure * 1000) / 1000, ...reading, limitBytes: this.settings.limitBytes };
    if (rising) this.options.logger.warn(details, `memory overload: ${OVERLOAD_LEVELS[level]}`);
    else this.options.logger.info(details, `memory overload eased: ${OVERLOAD_LEVELS[level]}`);
  }
}

/** The memory limit when none is set: what the gateway is sized for (its k8s manifests' limit, which a deploy test holds equal). */
export const DEFAULT_MEMORY_LIMIT_BYTES = 256 * 1024 * 1024;

/** Where a container's memory limit is: cgroup v2, then v1. */
const CGROUP_LIMIT_FILES = ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes'];

/**
 * The memory limit of the process's container (its cgroup's), or undefined when it has none: `max`,
 * or a number no smaller than the machine's memory (cgroup v1 writes a huge one for none).
 */
export function containerMemoryLimitBytes(read: (path: string) => string = (path) => readFileSync(path, 'utf8'), machineBytes = os.totalmem()): number | undefined {
  for (const path of CGROUP_LIMIT_FILES) {
    let text: string;
    try {
      text = read(path).trim();
    } catch {
      continue;
    }
    const bytes = Number(text);
    return /^\d+$/.test(text) && bytes > 0 && bytes < machineBytes ? bytes : undefined;
  }
  return undefined;
}

/** The settings the overload manager reads: GATEWAY_MEMORY_LIMIT_MB (0: the container's), and the thresholds in percent. */
export interface OverloadConfig {
  GATEWAY_MEMORY_LIMIT_MB: number;
  OVERLOAD_CLOSE_PERCENT: number;
  OVERLOAD_NO_STORE_PERCENT: number;
  OVERLOAD_SHED_PERCENT: number;
}

export function overloadSettings(config: OverloadConfig, containerLimitBytes: number | undefined): OverloadSettings {
  const limitBytes = config.GATEWAY_MEMORY_LIMIT_MB > 0 ? config.GATEWAY_MEMORY_LIMIT_MB * 1024 * 1024 : (containerLimitBytes ?? DEFAULT_MEMORY_LIMIT_BYTES);
  return { limitBytes, thresholds: [config.OVERLOAD_CLOSE_PERCENT / 100, config.OVERLOAD_NO_STORE_PERCENT / 100, config.OVERLOAD_SHED_PERCENT / 100] };
}

/** The thresholds must rise with the levels: each step begins no sooner than the one before it. */
export function overloadConfigProblems(config: OverloadConfig): string[] {
  const { OVERLOAD_CLOSE_PERCENT: close, OVERLOAD_NO_STORE_PERCENT: noStore, OVERLOAD_SHED_PERCENT: shed } = config;
  if (close <= noStore && noStore <= shed) return [];
  return [`OVERLOAD_CLOSE_PERCENT, OVERLOAD_NO_STORE_PERCENT, OVERLOAD_SHED_PERCENT: must not decrease (got ${close}, ${noStore}, ${shed})`];
}
