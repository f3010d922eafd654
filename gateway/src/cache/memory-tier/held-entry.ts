import { CONTENT_CODINGS } from '../compression.js';
import { headerList, type CachedResponse, type Variants } from '../entry.js';

/** An entry held here: with its header list made once, and its own copy of its scope's generation key (see `MemoryTier.held`). */
export interface HeldEntry extends CachedResponse {
  headerList: readonly string[];
  generationKey: string;
}

/** `entry` as the tier holds it under `generationKey`: every body its own buffer, each header list made once here rather than on every hit. */
export function heldEntry(entry: CachedResponse, generationKey: string): HeldEntry {
  return { ...entry, body: ownCopy(entry.body), headerList: headerList(entry.headers), variants: ownVariants(entry.variants), generationKey };
}

/** Each variant's body in a buffer of its own (see `ownCopy`), with its header list made once. */
function ownVariants(variants: Variants | undefined): Variants | undefined {
  if (!variants) return undefined;
  const own: Variants = {};
  for (const coding of CONTENT_CODINGS) {
    const variant = variants[coding];
    if (variant) own[coding] = { headers: variant.headers, body: ownCopy(variant.body), headerList: headerList(variant.headers) };
  }
  return own;
}

/**
 * The body in a buffer of its own. A slice of a larger buffer would keep all of it alive: a reply
 * from Redis, or one of Node's 8 KiB pool slabs, which `Buffer.from` uses for small copies.
 */
function ownCopy(body: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(body.length);
  body.copy(copy);
  return copy;
}
