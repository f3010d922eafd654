import { LRUCache } from 'lru-cache';
import { byteBounds, entrySize, generationSize } from './held-bytes.js';
import type { HeldEntry } from './held-entry.js';

/** The reads of one scope's hold and generation under way, and how many invalidations of the scope came meanwhile. */
interface TagWatch {
  reads: number;
  invalidations: number;
}

/** A read of a scope's hold and generation, sent while the tier tracked (see `MemoryTier.watch`). */
export interface TagRead {
  readonly generationKey: string;
  readonly session: number;
  /** The scope's invalidations counted when the read was sent: any more when it ends spoil it. */
  readonly invalidations: number;
  readonly watch: TagWatch;
}

/**
 * What the tier holds: entries, and the generations known current and not held, each bounded by
 * bytes (lru-cache's maxSize, least recently used first); and the reads of scopes under way, which
 * an invalidation of their scope or a new session spoils. Whether the tier may trust any of it is
 * the tier's to say.
 */
export class HeldStore {
  readonly #entries: LRUCache<string, HeldEntry>;
  /** The current generation of each scope (by generation key) known to be current and not held. */
  readonly #generations: LRUCache<string, string>;
  /** By generation key, while reads of the scope are under way. */
  readonly #watches = new Map<string, TagWatch>();
  /** Bumped whenever what was learnt can no longer be trusted (a connection lost, a flush, a new topology). */
  #session = 0;

  constructor(maxBytes: number) {
    // Counted by what each holds, keys included: a flood of distinct keys (query strings, ids) can
    // fill the tier, never grow it past its bytes.
    const bounds = byteBounds(maxBytes);
    this.#entries = new LRUCache<string, HeldEntry>({ maxSize: bounds.entries, sizeCalculation: (entry, key) => entrySize(key, entry) });
    this.#generations = new LRUCache<string, string>({ maxSize: bounds.generations, sizeCalculation: (generation, key) => generationSize(key, generation) });
  }

  /** Bytes of entries and generations held now. */
  get heldBytes(): number {
    return this.#entries.calculatedSize + this.#generations.calculatedSize;
  }

  /**
   * The entry under `entryKey`, if held and its generation is still the current one. Its generation
   * is looked up by the entry's own generation key, hashed once, rather than the scope's, a new
   * string on every request that each lookup would hash again.
   */
  current(entryKey: string): HeldEntry | undefined {
    const entry = this.#entries.get(entryKey);
    if (entry === undefined || this.#generations.get(entry.generationKey) !== entry.generation) return undefined;
    return entry;
  }

  /** The generation known current for the scope of `generationKey`, if one is. */
  generation(generationKey: string): string | undefined {
    return this.#generations.get(generationKey);
  }

  keep(entryKey: string, entry: HeldEntry): void {
    this.#entries.set(entryKey, entry);
  }

  /** A read of the scope of `generationKey` starts. */
  watch(generationKey: string): TagRead {
    let watch = this.#watches.get(generationKey);
    if (watch === undefined) {
      watch = { reads: 0, invalidations: 0 };
      this.#watches.set(generationKey, watch);
    }
    watch.reads += 1;
    return { generationKey, session: this.#session, invalidations: watch.invalidations, watch };
  }

  /** Ends `read`, installing `generation` (unless null) if nothing spoilt the read meanwhile. */
  endRead(read: TagRead, generation: string | null): void {
    const { watch, generationKey } = read;
    watch.reads -= 1;
    if (watch.reads === 0 && this.#watches.get(generationKey) === watch) this.#watches.delete(generationKey);
    if (generation !== null && read.session === this.#session && read.invalidations === watch.invalidations) {
      this.#generations.set(generationKey, generation);
    }
  }

  /** Forgets what is known of a scope (by its generation key), and spoils its reads under way. */
  forgetTag(generationKey: string): void {
    this.#generations.delete(generationKey);
    const watch = this.#watches.get(generationKey);
    if (watch) watch.invalidations += 1;
  }

  /** Forgets everything, and starts a new session. */
  forgetAll(): void {
    this.#entries.clear();
    this.#generations.clear();
    // Reads under way keep their watch: the session they were sent in is over, which spoils them.
    this.#watches.clear();
    this.#session += 1;
  }
}
