import { retryAfter } from '@app/shared/platform/http/headers';
import { HttpProblem } from '@app/shared/platform/problem';

export interface ConcurrencyLimitSettings {
  /** Requests this gateway may have in flight to one upstream at once. */
  limit: number;
  /**
   * The share of `limit` writes keep from reads. Reads keep all but twice as much (never less than
   * writes keep, nor more than they leave); either kind may take the slots between.
   */
  writeShare: number;
}

/** How long a shed client is asked to wait: the limit frees up within milliseconds, not minutes. */
export const SHED_RETRY_AFTER_SECONDS = 1;
/** How long a request waits for a slot before it is shed: no longer than a shed client would wait to retry. */
export const MAX_WAIT_MS = SHED_RETRY_AFTER_SECONDS * 1_000;

export type Kind = 'read' | 'write';

/** A request waiting for a slot, in order of arrival. */
interface Waiter {
  caller: string | undefined;
  granted: (release: (() => void) | undefined) => void;
  timer: NodeJS.Timeout;
}

/** While others are refused (or wait), one caller holds at most this many of the most its kind may hold. */
const fairShare = (limit: number) => Math.max(1, Math.floor(limit / 4));
/** How long after another caller found no slot free the fair share applies. */
const CONTENDED_MS = 1_000;

/**
 * The gateway's load shedding for one upstream: at most `limit` requests in flight to it, the ones
 * over that refused with 503 and Retry-After (after a short wait, see below) before they reach the
 * service, whose bounded pool queue would otherwise refuse them later, after they cost it work.
 * Each kind keeps a reserve the other cannot take, and either takes the slots between as it comes:
 * however many reads pile up writes still get through, slow writes cannot take the slots of the
 * cache fills, and a write is shed only when the service has no room for it. Cache hits never get
 * here. Why a static limit, why these shares, and how to size the limit: docs/architecture.md
 * (Load shedding). No npm package offers an HTTP-level limit with a reserve per request class: the
 * counting is a few lines.
 *
 * A request that finds no slot free may wait for one (`acquire`), in order of arrival, at most
 * `MAX_WAIT_MS` and behind at most as many others of its kind as the service answered in the last
 * `MAX_WAIT_MS` (and never fewer than `limit`): a slot frees within milliseconds
 * when the service has room, and a client that waits gets its answer sooner than one shed and told
 * to come back in a second. The waiting costs the service nothing: it still sees at most `limit`.
 */
export class ConcurrencyLimit {
  #reads = 0;
  #writes = 0;
  /** Slots each kind keeps, that the other kind cannot take. */
  readonly #reserve: { read: number; write: number };
  /** Slots each caller holds now, by kind (no entry for a caller holding none). */
  readonly #held = { read: new Map<string, number>(), write: new Map<string, number>() };
  /** The last caller that found no slot free (refused, or waiting), by kind, and when (Date.now()). */
  readonly #lastShed: Record<Kind, { caller: string | undefined; at: number }> = { read: { caller: undefined, at: 0 }, write: { caller: undefined, at: 0 } };
  /** The requests waiting for a slot, by kind, first come first. */
  readonly #waiting: Record<Kind, Waiter[]> = { read: [], write: [] };
  /**
   * Slots of each kind freed in the window of `MAX_WAIT_MS` now running and in the one before it,
   * and when the one now running began (Date.now()): how many of a kind the service answers in the
   * time a request may wait.
   */
  readonly #freed = { read: { now: 0, before: 0 }, write: { now: 0, before: 0 }, since: Date.now() };
  /**
   * One problem for every request shed, made once: it is the same answer each time, and an
   * HttpProblem (an Error) records a stack trace when made, work for nothing under overload, when
   * hundreds of requests a second are shed.
   */
  readonly #shed: HttpProblem;

  constructor(
    readonly upstream: string,
    readonly settings: ConcurrencyLimitSettings,
  ) {
    const write = Math.min(settings.limit - 1, Math.max(1, Math.ceil(settings.limit * settings.writeShare)));
    this.#reserve = { write, read: Math.max(settings.limit - 2 * write, Math.min(write, settings.limit - write)) };
    this.#shed = new HttpProblem('service-unavailable', `The ${upstream} service is busy: the gateway sheds requests beyond its limit; try again shortly`, {
      headers: retryAfter(SHED_RETRY_AFTER_SECONDS),
    });
  }

  /** Requests in flight to the upstream now, by kind. */
  get inFlight(): { read: number; write: number } {
    return { read: this.#reads, write: this.#writes };
  }

  /** Requests waiting for a slot now, by kind. */
  get waiting(): Record<Kind, number> {
    return { read: this.#waiting.read.length, write: this.#waiting.write.length };
  }

  /**
   * A slot for one request to the upstream, or undefined when none is free for its kind (every slot
   * but the other kind's unused reserve is taken). Release it exactly once. A `caller` (who the rate
   * limits count) holding its fair share of the most its kind may hold is refused while another
   * caller found no slot free (refused, or waiting) within the last second: a lone caller may use
   * them all, but not hold them out of others' reach.
   */
  tryAcquire(write: boolean, caller?: string): (() => void) | undefined {
    return this.#admit(write, caller) === 'room' ? this.#take(write, caller) : undefined;
  }

  /**
   * Gives `granted` a slot as `tryAcquire` does, at once or once one is freed for it (waiting in
   * order, see the class), or undefined when the request is to be shed: its caller beyond its fair
   * share, too many waiting already, or `MAX_WAIT_MS` gone by. Returns how to stop waiting (its
   * client went), or undefined when `granted` was called before it returned.
   */
  acquire(write: boolean, caller: string | undefined, granted: (release: (() => void) | undefined) => void): (() => void) | undefined {
    const queue = this.#waiting[write ? 'write' : 'read'];
    const admitted = this.#admit(write, caller);
    // Nobody of its kind waits while there is room for it: a slot freed goes to the first waiting.
    if (admitted === 'room') {
      granted(this.#take(write, caller));
      return undefined;
    }
    if (admitted === 'unfair' || queue.length >= this.#mostWaiting(write ? 'write' : 'read')) {
      granted(undefined);
      return undefined;
    }
    const waiter: Waiter = {
      caller,
      granted,
      timer: setTimeout(() => {
        queue.splice(queue.indexOf(waiter), 1);
        granted(undefined);
      }, MAX_WAIT_MS).unref(),
    };
    queue.push(waiter);
    return () => {
      const at = queue.indexOf(waiter);
      if (at === -1) return;
      queue.splice(at, 1);
      clearTimeout(waiter.timer);
    };
  }

  /** Room for the request now, or none ('full'), or room but not for this caller while others are refused ('unfair'). */
  #admit(write: boolean, caller: string | undefined): 'room' | 'full' | 'unfair' {
    const kind = write ? 'write' : 'read';
    if (this.#unfair(write, caller)) return 'unfair';
    if (this.#hasRoom(write)) return 'room';
    this.#lastShed[kind] = { caller, at: Date.now() };
    return 'full';
  }

  /**
   * Whether `caller` holds its fair share of its kind while another caller was refused. Refused
   * for it, a caller is not recorded as refused: the caller it makes room for stays the one remembered.
   */
  #unfair(write: boolean, caller: string | undefined): boolean {
    const kind = write ? 'write' : 'read';
    if (caller === undefined) return false;
    const most = this.settings.limit - this.#reserve[write ? 'read' : 'write'];
    return (this.#held[kind].get(caller) ?? 0) >= fairShare(most) && this.#othersShed(kind, caller);
  }

  #take(write: boolean, caller: string | undefined): () => void {
    const kind = write ? 'write' : 'read';
    if (write) this.#writes++;
    else this.#reads++;
    if (caller !== undefined) this.#held[kind].set(caller, (this.#held[kind].get(caller) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (write) this.#writes--;
      else this.#reads--;
      this.#rollFreed();
      this.#freed[kind].now++;
      if (caller !== undefined) {
        const holding = (this.#held[kind].get(caller) ?? 1) - 1;
        if (holding === 0) this.#held[kind].delete(caller);
        else this.#held[kind].set(caller, holding);
      }
      this.#wake();
    };
  }

  /**
   * Gives the slots there is room for to the first waiting of each kind, writes first (reads keep
   * their reserve anyway); one whose caller now holds its fair share while others wait is shed.
   */
  #wake(): void {
    for (const write of [true, false]) {
      const queue = this.#waiting[write ? 'write' : 'read'];
      while (this.#hasRoom(write)) {
        const waiter = queue.shift();
        if (!waiter) break;
        clearTimeout(waiter.timer);
        waiter.granted(this.#unfair(write, waiter.caller) ? undefined : this.#take(write, waiter.caller));
      }
    }
  }

  /**
   * How many of a kind may wait: as many as the service answered of it in the last `MAX_WAIT_MS`
   * (as many as get a slot within that wait if it keeps its pace), and never fewer than `limit`. A
   * cap of `limit` alone would shed the writes of a burst the service is answering: with hits
   * answered fast, connections pile up on the slower writes, hundreds more than the slots.
   */
  #mostWaiting(kind: Kind): number {
    this.#rollFreed();
    return Math.max(this.settings.limit, this.#freed[kind].before);
  }

  /** Starts a new window of freed slots when `MAX_WAIT_MS` has passed (the one before is empty when two have). */
  #rollFreed(): void {
    const freed = this.#freed;
    const elapsed = Date.now() - freed.since;
    if (elapsed < MAX_WAIT_MS) return;
    for (const kind of ['read', 'write'] as const) {
      freed[kind].before = elapsed < 2 * MAX_WAIT_MS ? freed[kind].now : 0;
      freed[kind].now = 0;
    }
    freed.since += elapsed - (elapsed % MAX_WAIT_MS);
  }

  /** Whether one more request of this kind leaves the other kind its unused reserve. */
  #hasRoom(write: boolean): boolean {
    const [mine, other] = write ? [this.#writes, this.#reads] : [this.#reads, this.#writes];
    return mine + Math.max(other, this.#reserve[write ? 'read' : 'write']) < this.settings.limit;
  }

  /** Whether a caller other than `caller` found no slot of this kind free within the last second. */
  #othersShed(kind: Kind, caller: string | undefined): boolean {
    const last = this.#lastShed[kind];
    return last.caller !== caller && Date.now() - last.at < CONTENDED_MS;
  }

  /** The answer to a request that found no free slot. */
  shedProblem(): HttpProblem {
    return this.#shed;
  }
}
