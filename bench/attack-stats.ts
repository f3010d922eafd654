/**
 * The pure parts of `npm run bench:attacks` (bench/attacks.ts): its settings, the requests and
 * bodies its attacks send, the bounds of issue 44's "Done when" and the verdict on each, and the
 * lines it prints.
 */
import { randomBytes } from 'node:crypto';
import { countOf } from '../tools/env.ts';

export const ATTACKS = ['pages', 'connections', 'metrics-body', 'invalid-bodies'] as const;
export type AttackName = (typeof ATTACKS)[number];

/** What each attack is, as the report names it. */
export const ATTACK_TITLES: Record<AttackName, string> = {
  pages: 'big pages refilled',
  connections: 'held connections',
  'metrics-body': 'a slow metrics body',
  'invalid-bodies': 'an invalid body flood',
};

/** The bounds every attack is judged by (issue 44, "Done when"); memory in MiB, as /proc counts it. */
export const BOUNDS = { peakRssMiB: 200, returnMiB: 32, lagP99Ms: 100, slowReadMs: 1_000, slowReads: 0 };

export interface Settings {
  attacks: AttackName[];
  /** How long after an attack's sockets are closed the gateway's RSS is read again. */
  afterSeconds: number;
  /** The normal client's reads per second, beside each attack. */
  normalPerSecond: number;
  /** How often each held connection gets its next byte. */
  trickleMs: number;
  pages: { products: number; seconds: number; rounds: number; concurrency: number };
  connections: { count: number; perSecond: number; seconds: number };
  metricsBody: { count: number; seconds: number };
  invalidBodies: { perSecond: number; seconds: number; elements: number };
}

/** The attacks named by ATTACKS (a comma-separated list), every one when it is not set. */
export function attacksOf(value: string | undefined): AttackName[] {
  if (value === undefined) return [...ATTACKS];
  const names = value.split(',');
  const unknown = names.filter((name) => !(ATTACKS as readonly string[]).includes(name));
  if (names.length === 0 || unknown.length > 0) throw new Error(`ATTACKS must be a comma-separated list of ${ATTACKS.join(', ')}, not ${JSON.stringify(value)}`);
  return ATTACKS.filter((name) => names.includes(name));
}

/** The settings from `env` (docs/performance.md lists them); a count that is not a whole number of at least 1 is refused. */
export function settingsFrom(env: Record<string, string | undefined>): Settings {
  const count = (name: string, fallback: number) => countOf(name, env[name], fallback);
  return {
    attacks: attacksOf(env.ATTACKS),
    afterSeconds: count('ATTACK_AFTER_SECONDS', 30),
    normalPerSecond: count('ATTACK_NORMAL_PER_SECOND', 10),
    trickleMs: count('ATTACK_TRICKLE_MS', 5_000),
    pages: {
      products: count('ATTACK_PAGES_PRODUCTS', 400),
      seconds: count('ATTACK_PAGES_SECONDS', 20),
      rounds: count('ATTACK_PAGES_ROUNDS', 1_000),
      concurrency: count('ATTACK_PAGES_CONCURRENCY', 4),
    },
    connections: {
      count: count('ATTACK_CONNECTIONS', 12_000),
      perSecond: count('ATTACK_CONNECTIONS_PER_SECOND', 500),
      seconds: count('ATTACK_CONNECTIONS_SECONDS', 45),
    },
    metricsBody: { count: count('ATTACK_METRICS_CONNECTIONS', 5_000), seconds: count('ATTACK_METRICS_SECONDS', 50) },
    invalidBodies: {
      perSecond: count('ATTACK_INVALID_PER_SECOND', 27),
      seconds: count('ATTACK_INVALID_SECONDS', 16),
      elements: count('ATTACK_INVALID_ELEMENTS', 50_000),
    },
  };
}

/** The soft limit on open files in a /proc/<pid>/limits text; undefined when it is unlimited or missing. */
export function openFilesLimit(limits: string): number | undefined {
  const soft = /^Max open files\s+(\d+)/m.exec(limits)?.[1];
  return soft === undefined ? undefined : Number(soft);
}

/**
 * How many connections the held-connections attack opens: `wanted`, or as many as the open-file
 * limit leaves once the gateway and this script have `reserve` files each for everything else (the
 * gateway inherits this script's limit, and holds one file per connection too).
 */
export function connectionsWithin(wanted: number, limit: number | undefined, reserve = 500): number {
  return limit === undefined ? wanted : Math.max(0, Math.min(wanted, limit - reserve));
}

/** A UUIDv7 of the millisecond `ms` with fresh random bits, in its text form. */
export function uuidV7At(ms: number): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(ms, 0, 6);
  bytes[6] = 0x70 | (bytes[6]! & 0x0f);
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * A list cursor no page ever returned: a fresh UUIDv7 from `ms` (before every product, so that the
 * page after it is full), spelled as the API spells cursors (base64url of the id). Each one names
 * a page the cache has not seen.
 */
export const freshCursor = (ms: number) => Buffer.from(uuidV7At(ms), 'latin1').toString('base64url');

/**
 * A product description of `codePoints` characters (the most the API takes is 5,000), each a random
 * pictograph of 4 bytes in UTF-8: 200 of them make a page of about 4 MB, which compresses poorly.
 */
export function bigDescription(codePoints: number): string {
  const random = randomBytes(codePoints * 2);
  return Array.from({ length: codePoints }, (_, i) => String.fromCodePoint(0x1f300 + (random.readUInt16BE(i * 2) % 0x300))).join('');
}

/** The invalid body of the flood: a JSON array of `elements` zeros (100,001 bytes for 50,000). */
export const zerosArray = (elements: number) => `[${Array.from({ length: elements }, () => '0').join(',')}]`;

/** The normal client's reads of one attack: each one's time (ms) and status (`error` when it got no answer). */
export interface Read {
  ms: number;
  status: number | 'error';
}

export interface ReadSummary {
  count: number;
  p50Ms: number;
  maxMs: number;
  overBound: number;
  /** Reads answered with anything but 2xx, or not answered. */
  failed: number;
}

export function summariseReads(reads: Read[]): ReadSummary {
  const sorted = reads.map((r) => r.ms).sort((a, b) => a - b);
  return {
    count: reads.length,
    p50Ms: sorted.length === 0 ? 0 : Math.round(sorted[Math.floor((sorted.length - 1) / 2)]!),
    maxMs: Math.round(sorted.at(-1) ?? 0),
    overBound: sorted.filter((ms) => ms > BOUNDS.slowReadMs).length,
    failed: reads.filter((r) => r.status === 'error' || r.status < 200 || r.status > 299).length,
  };
}

/** What was seen of the gateway over one attack and the wait after it. */
export interface Observed {
  rssStartMiB: number;
  /** The highest of the samples taken every 100 ms, and the process's own high-water mark (VmHWM). */
  rssPeakMiB: number;
  rssAfterMiB: number;
  /** The event-loop delay's p99 over the attack; undefined when the gateway did not answer the probe. */
  lagP99Ms: number | undefined;
  reads: ReadSummary;
  /** Whether the gateway was still running at the end: a crash frees its memory, and must not read as a pass. */
  running: boolean;
}

export interface Verdict {
  bound: string;
  pass: boolean;
}

/** Each bound of the "Done when", held or missed by what was `observed`. */
export function verdictsOf(observed: Observed): Verdict[] {
  const { rssStartMiB, rssPeakMiB, rssAfterMiB, lagP99Ms, reads, running } = observed;
  return [
    { bound: 'the gateway still running', pass: running },
    { bound: `RSS ≤ ${BOUNDS.peakRssMiB} MiB throughout`, pass: rssPeakMiB <= BOUNDS.peakRssMiB },
    { bound: `RSS back within ${BOUNDS.returnMiB} MiB of its start`, pass: rssAfterMiB - rssStartMiB <= BOUNDS.returnMiB },
    { bound: `event-loop lag p99 ≤ ${BOUNDS.lagP99Ms} ms`, pass: lagP99Ms !== undefined && lagP99Ms <= BOUNDS.lagP99Ms },
    { bound: `normal client: ${BOUNDS.slowReads} reads over ${BOUNDS.slowReadMs / 1000} s`, pass: reads.count > 0 && reads.overBound <= BOUNDS.slowReads },
  ];
}

const mib = (n: number) => `${Math.round(n)} MiB`;

/** The lines printed for one attack: what it did, what was seen, and each bound's verdict. */
export function reportLines(name: AttackName, did: string, observed: Observed, afterSeconds: number): string[] {
  const { rssStartMiB, rssPeakMiB, rssAfterMiB, lagP99Ms, reads } = observed;
  return [
    `${name} (${ATTACK_TITLES[name]}): ${did}`,
    `  RSS: start ${mib(rssStartMiB)}, peak ${mib(rssPeakMiB)}, ${afterSeconds} s after ${mib(rssAfterMiB)}`,
    `  event-loop lag p99: ${lagP99Ms === undefined ? 'no answer from the probe' : `${lagP99Ms} ms`}`,
    `  normal client: ${reads.count} reads, p50 ${reads.p50Ms} ms, max ${reads.maxMs} ms, ${reads.overBound} over ${BOUNDS.slowReadMs / 1000} s, ${reads.failed} not 2xx`,
    ...verdictsOf(observed).map((v) => `  ${v.pass ? 'PASS' : 'FAIL'}  ${v.bound}`),
  ];
}

/** The bounds missed, as `attack: bound`, over every attack run. */
export function missedBounds(results: { name: AttackName; observed: Observed }[]): string[] {
  return results.flatMap(({ name, observed }) => verdictsOf(observed).filter((v) => !v.pass).map((v) => `${name}: ${v.bound}`));
}
