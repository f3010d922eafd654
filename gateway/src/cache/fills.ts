import type { FetchedResponse } from '../proxy/upstream.js';
import type { CachedResponse } from './entry.js';
import type { ReadKeying } from './keys.js';

/** A fill's outcome: what the service answered, and that answer as the gateway keeps and sends it (compressed once). */
export interface Fill {
  fetched: FetchedResponse;
  representation: Pick<CachedResponse, 'status' | 'headers' | 'body' | 'variants'>;
}

/**
 * The cache fills under way: one fetch per entry and generation, however many requests want it at
 * the same moment (request collapsing). A miss starts its fill as soon as it knows the entry's
 * generation, with no turn between looking here and starting it, so no two requests start the same.
 */
export class Fills {
  readonly #flights = new Map<string, Promise<Fill>>();

  /** The fill started for `keying`'s entry under `generation`, if one is under way. */
  started(keying: ReadKeying, generation: string): Promise<Fill> | undefined {
    return this.#flights.get(flightKey(keying, generation));
  }

  /** Makes `flight` the fill of `keying`'s entry under `generation` until `done` settles. */
  start(keying: ReadKeying, generation: string, flight: Promise<Fill>, done: Promise<void>): void {
    const key = flightKey(keying, generation);
    this.#flights.set(key, flight);
    void done.finally(() => {
      if (this.#flights.get(key) === flight) this.#flights.delete(key);
    });
  }
}

const flightKey = (keying: ReadKeying, generation: string) => `${keying.entryKey}\n${generation}`;
