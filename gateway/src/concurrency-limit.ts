import type { IncomingMessage } from 'node:http';
import { HttpProblem } from '@app/shared/platform/problem';

export interface ConcurrencyLimitSettings {
  /** Requests this gateway may have in flight to one upstream at once. */
  limit: number;
  /**
   * The share of `limit` each kind keeps from the other: writes keep it, and reads keep as much (at
   * most what writes leave); either may take the rest.
   */
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
 * bounded pool queue would otherwise refuse them later, after they cost it work). Each kind keeps a
 * reserve of the limit (the write share of it, for reads and writes alike) that the other kind cannot
 * take, and either takes the slots between as it comes: however many reads pile up, writes still get
 * through, and slow writes (a commit waits for the disk) cannot take every slot of the cache fills
 * that keep the cache warm. A kind is not capped at its share, though: a write is shed only when the
 * service has no room for it, not while read slots stand idle (when cache hits are answered fast,
 * connections pile up on writes, and a hard cap shed them although the service had room). Cache hits
 * never get here: they are answered before any request to a service is considered.
 *
 * A static limit, from configuration: the gateway measures a service's latency together with its
 * own event-loop delay, so a latency-driven (gradient, AIMD) limit would shrink when the gateway is
 * busy and shed requests the service had room for. A request counts here from before it is sent
 * until its response arrives (a service gives back its database connection before it answers), so
 * this count is never below the service's own: a limit of the service's pool plus its queue means
 * the service never refuses a request for a full queue (see the README's configuration section).
 * No npm package offers this (an HTTP-level limit with a reserve per request class): the counting
 * is a few lines.
 */
export class ConcurrencyLimit {
  #reads = 0;
  #writes = 0;
  /** Slots each kind keeps, that the other kind cannot take. */
  readonly #reserve: { read: number; write: number };
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
    const write = Math.min(settings.limit - 1, Math.max(1, Math.ceil(settings.limit * settings.writeShare)));
    this.#reserve = { write, read: Math.min(write, settings.limit - write) };
    this.#shed = new HttpProblem('service-unavailable', `The ${upstream} service is busy: the gateway sheds requests beyond its limit; try again shortly`, {
      headers: { 'Retry-After': String(SHED_RETRY_AFTER_SECONDS) },
    });
  }

  /** Requests in flight to the upstream now, by kind. */
  get inFlight(): { read: number; write: number } {
    return { read: this.#reads, write: this.#writes };
  }

  /**
   * A slot for one request to the upstream, or undefined when none is free for its kind (every slot
   * but the other kind's unused reserve is taken). Release it exactly once. A `caller` (who the rate
   * limits count) holding its fair share of the most its kind may hold is refused while another
   * caller was refused for want of a slot within the last second: a lone caller may use them all,
   * but not hold them out of others' reach.
   */
  tryAcquire(write: boolean, caller?: string): (() => void) | undefined {
    const kind = write ? 'write' : 'read';
    const limit = this.settings.limit - this.#reserve[write ? 'read' : 'write'];
    const held = caller === undefined ? 0 : (this.#held[kind].get(caller) ?? 0);
    if (!this.#hasRoom(write)) {
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

  /** Whether one more request of this kind leaves the other kind its unused reserve. */
  #hasRoom(write: boolean): boolean {
    const [mine, other] = write ? [this.#writes, this.#reads] : [this.#reads, this.#writes];
    return mine + Math.max(other, this.#reserve[write ? 'read' : 'write']) < this.settings.limit;
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
