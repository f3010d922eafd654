import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendProblem } from '@app/shared/platform/http';
import { HttpProblem } from '@app/shared/platform/problem';
import type { RequestHandler } from 'express';

export interface ConcurrencyLimitSettings {
  /** Requests this gateway may have in flight to one upstream at once. */
  limit: number;
  /** The share of `limit` that is the writes': reads hold at most the rest, writes at most this. */
  writeShare: number;
}

/** How long a shed client is asked to wait: the limit frees up within milliseconds, not minutes. */
export const SHED_RETRY_AFTER_SECONDS = 1;

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

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
 * until after its response is read, so this count is never below the service's own: a limit of
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

  /** A slot for one request to the upstream, or undefined when none is free. Release it exactly once. */
  tryAcquire(write: boolean): (() => void) | undefined {
    if (write ? this.#writes >= this.#writeLimit : this.#reads >= this.#readLimit) return undefined;
    if (write) this.#writes++;
    else this.#reads++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (write) this.#writes--;
      else this.#reads--;
    };
  }

  /** The answer to a request that found no free slot. */
  shedProblem(): HttpProblem {
    return this.#shed;
  }
}

/**
 * Holds a slot of `limit` for the request until its response is done (true); false when none is
 * free (counted with `onShed`: the caller answers with `limit.shedProblem()`).
 */
export function holdSlot(limit: ConcurrencyLimit, req: IncomingMessage, res: ServerResponse, onShed: (limit: ConcurrencyLimit, write: boolean) => void): boolean {
  const write = isWrite(req);
  const release = limit.tryAcquire(write);
  if (!release) {
    onShed(limit, write);
    return false;
  }
  res.once('close', release);
  return true;
}

/**
 * Holds a slot of the request's upstream until its response is done, or answers 503 when there is
 * none. Mounted just before the proxies: everything that reaches it is on its way to a service.
 */
export function shedBeyondLimit(limitFor: (path: string) => ConcurrencyLimit | undefined, onShed: (limit: ConcurrencyLimit, write: boolean) => void): RequestHandler {
  return (req, res, next) => {
    const limit = limitFor(req.path);
    if (!limit || holdSlot(limit, req, res, onShed)) next();
    // Answered here, not thrown: an expected refusal is counted, not logged as an error with a stack.
    else sendProblem(req, res, limit.shedProblem());
  };
}
