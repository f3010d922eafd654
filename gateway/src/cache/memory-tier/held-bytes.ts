import type { Representation } from '../entry.js';
import type { HeldEntry } from './held-entry.js';

/** The share of the tier's bytes its generations may take; a forgotten generation is a trip to Redis. */
const GENERATIONS_SHARE = 0.25;

/**
 * What an entry or a generation costs besides the bytes of its strings and body: the objects,
 * the body's own ArrayBuffer, the map slot and lru-cache's bookkeeping arrays.
 */
const ENTRY_OVERHEAD_BYTES = 512;
const GENERATION_OVERHEAD_BYTES = 160;

/** How a tier of `maxBytes` shares them: each part at least one byte, as lru-cache's maxSize must be. */
export function byteBounds(maxBytes: number): { entries: number; generations: number } {
  const generations = Math.max(1, Math.floor(maxBytes * GENERATIONS_SHARE));
  return { entries: Math.max(1, maxBytes - generations), generations };
}

/** A string's bytes in V8: one a character, two if any is beyond Latin-1. */
export function stringBytes(text: string): number {
  // eslint-disable-next-line no-control-regex
  return /[^\u0000-\u00ff]/.test(text) ? 2 * text.length : text.length;
}

/** What holding `entry` under `key` costs: its key, generation key and generation, each representation's headers and body. */
export function entrySize(key: string, entry: HeldEntry): number {
  let size = ENTRY_OVERHEAD_BYTES + stringBytes(key) + stringBytes(entry.generationKey) + entry.generation.length + representationSize(entry);
  for (const variant of Object.values(entry.variants ?? {})) size += ENTRY_OVERHEAD_BYTES + representationSize(variant);
  return size;
}

/** What knowing `generation` as the current one of `key` costs. */
export function generationSize(key: string, generation: string): number {
  return GENERATION_OVERHEAD_BYTES + stringBytes(key) + stringBytes(generation);
}

function representationSize(representation: Representation): number {
  let size = representation.body.length;
  for (const name in representation.headers) size += 16 + stringBytes(name) + stringBytes(representation.headers[name] ?? '');
  return size;
}
