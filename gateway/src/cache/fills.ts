import type { ServerResponse } from 'node:http';
import type { FetchedResponse } from '../upstream.js';
import type { ReadScope } from './scope.js';

/** A fill that has started: its fetch. */
export interface StartedFill {
  flight: Promise<FetchedResponse>;
}

/**
 * The cache fills under way: one fetch per entry and generation, however many requests want it at
 * the same moment (request collapsing). The cached reads start them; the hot path lets a request
 * whose lookup found one under way wait for it there, without express's per-request work. A miss
 * the hot path sends on to express to start a fill announces it first: the requests whose lookups
 * come back before express has started it (the same event-loop turn, under load) wait for it too,
 * rather than each going through express.
 */
export class Fills {
  readonly #flights = new Map<string, StartedFill>();
  readonly #announced = new Map<string, { started: Promise<StartedFill | undefined>; settle: (fill: StartedFill | undefined) => void }>();

  /** The fill started for `scope`'s entry under `generation`, if one is under way. */
  started(scope: ReadScope, generation: string): Promise<FetchedResponse> | undefined {
    return this.#flights.get(flightKey(scope, generation))?.flight;
  }

  /**
   * The fill of `scope`'s entry under `generation`, started or announced: resolves once it has
   * started, or undefined if what announced it never started it. Undefined when there is none.
   */
  underWay(scope: ReadScope, generation: string): Promise<StartedFill | undefined> | undefined {
    const key = flightKey(scope, generation);
    const started = this.#flights.get(key);
    return started ? Promise.resolve(started) : this.#announced.get(key)?.started;
  }

  /**
   * Says that the request `res` answers goes on to start this fill (unless another has). If none has
   * when `res` closes (the request was shed, or answered before the cached reads), the requests
   * waiting for it hear so (undefined) and go their own way.
   */
  announce(scope: ReadScope, generation: string, res: ServerResponse): void {
    const key = flightKey(scope, generation);
    if (this.#flights.has(key) || this.#announced.has(key)) return;
    let settle!: (fill: StartedFill | undefined) => void;
    const started = new Promise<StartedFill | undefined>((resolve) => (settle = resolve));
    this.#announced.set(key, { started, settle });
    res.once('close', () => {
      if (this.#announced.get(key)?.started !== started) return;
      this.#announced.delete(key);
      settle(undefined);
    });
  }

  /** Makes `flight` the fill of `scope`'s entry under `generation` until `done` settles. */
  start(scope: ReadScope, generation: string, flight: Promise<FetchedResponse>, done: Promise<void>): void {
    const key = flightKey(scope, generation);
    const fill = { flight };
    this.#flights.set(key, fill);
    const announced = this.#announced.get(key);
    if (announced) {
      this.#announced.delete(key);
      announced.settle(fill);
    }
    void done.finally(() => {
      if (this.#flights.get(key) === fill) this.#flights.delete(key);
    });
  }
}

const flightKey = (scope: ReadScope, generation: string) => `${scope.entryKey}\n${generation}`;
