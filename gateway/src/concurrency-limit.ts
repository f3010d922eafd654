import type { IncomingMessage } from 'node:http';
import { HttpProblem } from '@app/shared/platform/problem';

export interface ConcurrencyLimitSettings {
  /** Requests this gateway may have in flight to one upstream at once. */
  limit: number;
  /** The share of `limit` that is the writes': reads hold at most the rest, writes at most this. */
  writeShare: number;
}

/** How long a shed client is asked to wait: the limit frees up within milliseconds, not minutes. */
export const SHED_RETRY_AFTER_SECONDS = 1;

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** While others are refused, one caller holds at most this many of a kind's `limit` slots. */
const fairShare = (limit: number) => Math.max(1, Math.floor(limit / 4));
/** How long after another caller was refused a slot the fair share applies. */
const CONTENDED_MS = 1_000;

export const isWrite = (req: Pick<IncomingMessage, 'method'>) => WRITES.has(req.method ?? '');

/**
 * The gateway's load shedding for one upstream: at most `limit` requests in flight to it, and the
 * ones over that are refused at once with 503 and Retry-After, before they reach the service (its
 * bounded pool queue would otherwise refuse them later, after they cost it work). The limit is
 * split: writes hold at most their share of it, reads the rest. However many reads pile up, writes
 * still get through; and slow writes (a commit waits for the disk) cannot take the slots of cache
 * fills, which keep the cache warm. Cache hits never get here: they are answered before any request
 * to a service is considered.
 *
 * A static limit, from configuration: the gateway measures a service's latency together with its
 * own event-loop delay, so a latency-driven (gradient, AIMD) limit would shrink when the gateway is
 * busy and shed requests the service had room for. A request counts here from before it is sent
 * until its response arrives (a service gives back its database connection before it answers), so
 * this count is never below the service's own: a limit of
 * the service's pool plus its queue means the service never refuses a request for a full queue
 * (see the README's configuration section).
 * No npm package offers this (an HTTP-level limit with a share per request class): the counting is
 * a few lines.
 */
export class ConcurrencyLimit {
  #reads = 0;
  #writes = 0;
  readonly #readLimit: number;
  readonly #writeLimit: number;
  /** Slots each caller holds now, by kind (no entry for a caller holding none). */
  readonly #held = { read: new Map<string, number>(), write: new Map<string, number>() };
  /** The last caller refused for want of a slot, by kind, and when (Date.now()). */
  readonly #lastShed: Record<'read' | 'write', { caller: string | undefined; at: number }> = { read: { caller: undefined, at: 0 }, write: { caller: undefined, at: 0 } };
  /**
   * One problem for every request shed, made once: it is the same answer each time, and an
   * HttpProblem (an Error) records a stack trace when made, which under overload, when hundreds of
   * requests a second are shed, was 2% of the gateway's CPU time (profile of `npm run load`).
   */
  readonly #shed: HttpProblem;

  constructor(
    readonly upstream: string,
    readonly settings: ConcurrencyLimitSettings,
  ) {
    this.#writeLimit = Math.min(settings.limit - 1, Math.max(1, Math.ceil(settings.limit * settings.writeShare)));
    this.#readLimit = settings.limit - this.#writeLimit;
    this.#shed = new HttpProblem('service-unavailable', `The ${upstream} service is busy: the gateway sheds requests beyond its limit; try again shortly`, {
      headers: { 'Retry-After': String(SHED_RETRY_AFTER_SECONDS) },
    });
  }

  /** Requests in flight to the upstream now, by kind. */
  get inFlight(): { read: number; write: number } {
    return { read: this.#reads, write: this.#writes };
  }

  /**
   * A slot for one request to the upstream, or undefined when none is free. Release it exactly once.
   * A `caller` (who the rate limits count) holding its fair share of its kind's slots is refused
   * while another caller was refused for want of one within the last second: a lone caller may use
   * them all, but not hold them out of others' reach.
   */
  tryAcquire(write: boolean, caller?: string): (() => void) | undefined {
    const kind = write ? 'write' : 'read';
    const limit = write ? this.#writeLimit : this.#readLimit;
    const held = caller === undefined ? 0 : (this.#held[kind].get(caller) ?? 0);
    if ((write ? this.#writes : this.#reads) >= limit) {
      this.#lastShed[kind] = { caller, at: Date.now() };
      return undefined;
    }
    // Refused its share: not recorded, so the caller it makes room for stays the one remembered.
    if (held >= fairShare(limit) && this.#othersShed(kind, caller)) return undefined;
    if (write) this.#writes++;
    else this.#reads++;
    if (caller !== undefined) this.#held[kind].set(caller, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (write) this.#writes--;
      else this.#reads--;
      if (caller === undefined) return;
      const holding = (this.#held[kind].get(caller) ?? 1) - 1;
      if (holding === 0) this.#held[kind].delete(caller);
      else this.#held[kind].set(caller, holding);
    };
  }

  /** Whether a caller other than `caller` was refused a slot of this kind within the last second. */
  #othersShed(kind: 'read' | 'write', caller: string | undefined): boolean {
    const last = this.#lastShed[kind];
    return last.caller !== caller && Date.now() - last.at < CONTENDED_MS;
  }

  /** The answer to a request that found no free slot. */
  shedProblem(): HttpProblem {
    return this.#shed;
  }
}
