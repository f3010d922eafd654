import type { IncomingMessage } from 'node:http';
import { sendProblem } from '@app/shared/http';
import { HttpProblem } from '@app/shared/problem';
import type { RequestHandler } from 'express';

export interface ConcurrencyLimitSettings {
  /** Requests this gateway may have in flight to one upstream at once. */
  limit: number;
  /** The share of `limit` kept for writes: reads may hold at most the rest. */
  writeShare: number;
}

/** How long a shed client is asked to wait: the limit frees up within milliseconds, not minutes. */
export const SHED_RETRY_AFTER_SECONDS = 1;

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export const isWrite = (req: Pick<IncomingMessage, 'method'>) => WRITES.has(req.method ?? '');

/**
 * The gateway's load shedding for one upstream: at most `limit` requests in flight to it, and the
 * ones over that are refused at once with 503 and Retry-After, before they reach the service (its
 * bounded pool queue would otherwise refuse them later, after they cost it work). Reads may hold at
 * most `limit` minus the writes' share, so however many reads pile up, writes still get through.
 * Cache hits never get here: they are answered before any request to a service is considered.
 *
 * A static limit, from configuration: the gateway measures a service's latency together with its
 * own event-loop delay, so a latency-driven (gradient, AIMD) limit would shrink when the gateway is
 * busy and shed requests the service had room for. The limit only has to keep a service's pool
 * queue from overflowing and its wait short (see the README's configuration section).
 * No npm package offers this (an HTTP-level limit with a reserved share per request class): the
 * counting is a few lines.
 */
export class ConcurrencyLimit {
  #reads = 0;
  #writes = 0;
  readonly #readLimit: number;

  constructor(
    readonly upstream: string,
    readonly settings: ConcurrencyLimitSettings,
  ) {
    this.#readLimit = Math.max(1, settings.limit - Math.ceil(settings.limit * settings.writeShare));
  }

  get inFlight(): number {
    return this.#reads + this.#writes;
  }

  /** A slot for one request to the upstream, or undefined when none is free. Release it exactly once. */
  tryAcquire(write: boolean): (() => void) | undefined {
    if (this.inFlight >= this.settings.limit || (!write && this.#reads >= this.#readLimit)) return undefined;
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
    return new HttpProblem('service-unavailable', `The ${this.upstream} service is busy: the gateway sheds requests beyond its limit; try again shortly`, {
      headers: { 'Retry-After': String(SHED_RETRY_AFTER_SECONDS) },
    });
  }
}

/**
 * Holds a slot of the request's upstream until its response is done, or answers 503 when there is
 * none. Mounted just before the proxies: everything that reaches it is on its way to a service.
 */
export function shedBeyondLimit(limitFor: (path: string) => ConcurrencyLimit | undefined, onShed: (limit: ConcurrencyLimit, write: boolean) => void): RequestHandler {
  return (req, res, next) => {
    const limit = limitFor(req.path);
    if (!limit) {
      next();
      return;
    }
    const write = isWrite(req);
    const release = limit.tryAcquire(write);
    if (!release) {
      onShed(limit, write);
      // Answered here, not thrown: an expected refusal is counted, not logged as an error with a stack.
      sendProblem(req, res, limit.shedProblem());
      return;
    }
    res.once('close', release);
    next();
  };
}
