import type http from 'node:http';
import { BODY_LIMIT_BYTES } from '@app/shared/platform/http/bodies';
import type { HttpProblem } from '@app/shared/platform/problem';
import { traceOf } from '@app/shared/telemetry/spans';
import { ConcurrencyLimit, type ConcurrencyLimitSettings } from '../load-shedding/concurrency-limit.js';
import type { ServedUpstream } from '../upstream-model.js';
import { exchangeOf, type Exchange } from '../exchange.js';
import { hasBody, receiveBody } from './request-body.js';
import type { ResponseWriter } from '../respond.js';
import { RetryBudget } from './retry-budget.js';
import { fetchFromUpstream, upstreamProblem, upstreamProxy, type Deadlines, type FetchedResponse, type UpstreamProxy } from './upstream.js';
import { socketReset } from './upstream-agent.js';
import { failedTryOf, retryReason, type RetryReason } from './upstream-retry.js';

export interface ServiceHopOptions {
  deadlines: Deadlines;
  agent: http.Agent;
  /** The agent a retry goes through: a fresh connection each, never a pooled one (upstream-agent.ts). */
  retryAgent: http.Agent;
  concurrency: ConcurrencyLimitSettings;
  writer: ResponseWriter;
  /** Counts a request shed for want of a slot (metrics). */
  onShed: (limit: ConcurrencyLimit, write: boolean) => void;
  /** Counts a retry the budget `granted`, or refused (metrics). */
  onRetry?: (upstream: string, reason: RetryReason, granted: boolean) => void;
  /**
   * Runs once a proxied request is settled (the service answered with `status`, or it failed: 502),
   * before the client hears back: the cache renews what a write affects there.
   */
  onSettled?: (exchange: Exchange, status: number) => Promise<void> | undefined;
}

/**
 * The gateway's way to one service: its keep-alive agent, its proxy (http-proxy-middleware), its
 * retries and their budget (retry-budget.ts, upstream-retry.ts), and its concurrency limit. A retry
 * keeps its request's slot. Every request the gateway sends the service takes a slot here, and only here:
 * a proxied request holds one from when its body is in until the service answers (or the client
 * goes), and may wait a moment for one; a cache fill holds one until the service's answer is read,
 * however many requests it answers, and is shed at once when none is free (it may serve stale).
 */
export class ServiceHop {
  readonly limit: ConcurrencyLimit;
  /** The largest request body the service takes (services.json, else BODY_LIMIT_BYTES). */
  readonly #bodyLimitBytes: number;
  readonly #proxy: UpstreamProxy;
  readonly #budget = new RetryBudget();

  constructor(
    readonly upstream: ServedUpstream,
    private readonly options: ServiceHopOptions,
  ) {
    this.limit = new ConcurrencyLimit(upstream.name, options.concurrency);
    this.#bodyLimitBytes = upstream.body?.limitBytes ?? BODY_LIMIT_BYTES;
    this.#proxy = upstreamProxy(upstream, {
      deadlines: options.deadlines,
      agent: options.agent,
      retryAgent: options.retryAgent,
      events: { response: (req, proxyRes) => this.#answered(req, proxyRes), error: (req, res, error) => this.#failed(req, res, error) },
    });
  }

  /**
   * Proxies the request. A body still on its way holds no slot (slow senders would hold them all):
   * it is received whole first, within the service's body limit and the deadline.
   */
  forward(exchange: Exchange): void {
    if (!hasBody(exchange.req)) {
      this.#send(exchange);
      return;
    }
    receiveBody(exchange.req, this.options.deadlines.requestBodyMs, this.#bodyLimitBytes).then(
      (body) => {
        exchange.body = body;
        // The body is here: the service has nothing to agree to (and httpxy skips `proxyReq` for an Expect).
        if (exchange.req.headers.expect !== undefined) delete exchange.req.headers.expect;
        this.#send(exchange);
      },
      (problem: HttpProblem) => {
        exchange.closeConnection = true;
        this.options.writer.problem(exchange, problem);
      },
    );
  }

  /** Closes its connections to the service, idle or not: the gateway is releasing what it holds. */
  close(): void {
    this.options.agent.destroy();
    this.options.retryAgent.destroy();
  }

  /** A plain GET for the cache, body in memory; undefined when no slot is free (counted as shed). */
  fetch(exchange: Exchange): Promise<FetchedResponse> | undefined {
    const release = this.limit.tryAcquire(false);
    if (!release) {
      this.options.onShed(this.limit, false);
      return undefined;
    }
    const { req } = exchange;
    const request = { path: req.url ?? '/', headers: req.headers, requestId: exchange.requestId, remoteAddress: req.socket.remoteAddress, trace: traceOf(req) };
    const fill = (agent: http.Agent) => fetchFromUpstream(this.upstream, request, { deadlines: this.options.deadlines, agent, tried: exchange });
    this.#budget.tried();
    const flight = fill(this.options.agent).catch((error: Error) => {
      if (!this.#retries(exchange, error)) throw error;
      return fill(this.options.retryAgent);
    });
    // Given back once the service's answer is read, not after the store in Redis.
    flight.then(release, release);
    return flight;
  }

  /** Proxies the request once it has a slot: at once when one is free, else after a wait (`#wait`). */
  #send(exchange: Exchange): void {
    const write = exchange.kind === 'write';
    const release = this.limit.tryAcquire(write, exchange.caller);
    if (release) this.#forward(exchange, release);
    else this.#wait(exchange, write);
  }

  /** Waits for a slot (concurrency-limit.ts says how long), or sheds the request; a client that goes stops the wait. */
  #wait(exchange: Exchange, write: boolean): void {
    const { res } = exchange;
    // Undefined while `acquire` runs: it may shed the request before it returns.
    let stop: (() => void) | undefined = undefined;
    stop = this.limit.acquire(write, exchange.caller, (release) => {
      if (stop) res.off('close', stop);
      if (release) {
        this.#forward(exchange, release);
        return;
      }
      this.options.onShed(this.limit, write);
      this.options.writer.problem(exchange, this.limit.shedProblem());
    });
    if (stop) res.once('close', stop);
  }

  /** Sends the request on, holding `release`'s slot until the service answers or the client goes. */
  #forward(exchange: Exchange, release: () => void): void {
    exchange.releaseSlot = release;
    // `on`: a response closes once, and `once` would make a wrapper and a bound function per request.
    exchange.res.on('close', release);
    this.#budget.tried();
    this.#proxy.send(exchange, this.#proxyFailed(exchange));
  }

  /** The proxy calls back only when it fails (or, never here, when its path filter refuses the path). */
  #proxyFailed(exchange: Exchange): (error?: unknown) => void {
    return (error) => this.options.writer.failure(exchange, error ?? new Error(`no proxy took ${exchange.path}`));
  }

  /**
   * Whether the failed try goes again (upstream-retry.ts says when), within the budget: counted,
   * and logged with the request's id. A replica that reset the connection leaves the rotation,
   * retried or not.
   */
  #retries(exchange: Exchange, error: Error): boolean {
    const failed = failedTryOf(exchange, error);
    if (failed.reset && !failed.connectFailed && exchange.upstreamSocket) socketReset(exchange.upstreamSocket);
    const reason = retryReason(failed);
    if (!reason) return false;
    const granted = this.#budget.withdraw();
    this.options.onRetry?.(this.upstream.name, reason, granted);
    if (!granted) return false;
    exchange.retried = true;
    exchange.observed.log.warn({ upstream: this.upstream.name, reason, err: error }, 'upstream request retried on a fresh connection');
    return true;
  }

  #answered(req: http.IncomingMessage, proxyRes: http.IncomingMessage): void {
    const exchange = exchangeOf(req) as Exchange;
    // The service has done its work (its handler has given back its database connection): the cache's
    // renewal of a write, and the client's reading of the answer, take none of its time.
    exchange.releaseSlot?.();
    this.#afterSettled(exchange, proxyRes.statusCode ?? 502, proxyRes, undefined);
  }

  #failed(req: http.IncomingMessage, _res: http.ServerResponse, error: Error): void {
    const exchange = exchangeOf(req) as Exchange;
    if (this.#retries(exchange, error)) {
      this.#proxy.resend(exchange, this.#proxyFailed(exchange));
      return;
    }
    exchange.releaseSlot?.();
    exchange.observed.log.warn({ upstream: this.upstream.name, err: error }, 'upstream request failed');
    this.#afterSettled(exchange, 502, undefined, error);
  }

  /**
   * Answers once the cache has settled what the service's `status` means for it (at once when there
   * is nothing to settle): the service's response relayed, or the problem its `error` is. Whatever
   * throws or rejects on the way is answered as a failure and the service's response let go: the
   * client is answered, always.
   */
  #afterSettled(exchange: Exchange, status: number, proxyRes: http.IncomingMessage | undefined, error: Error | undefined): void {
    let settled: Promise<void> | undefined;
    try {
      settled = this.options.onSettled?.(exchange, status);
      if (!settled) {
        this.#answer(exchange, proxyRes, error);
        return;
      }
    } catch (thrown) {
      this.#fail(exchange, proxyRes, thrown);
      return;
    }
    settled.then(
      () => {
        try {
          this.#answer(exchange, proxyRes, error);
        } catch (thrown) {
          this.#fail(exchange, proxyRes, thrown);
        }
      },
      (rejected: unknown) => this.#fail(exchange, proxyRes, rejected),
    );
  }

  #answer(exchange: Exchange, proxyRes: http.IncomingMessage | undefined, error: Error | undefined): void {
    if (proxyRes) this.options.writer.relay(exchange, proxyRes);
    else if (exchange.res.headersSent) exchange.res.destroy();
    else this.options.writer.problem(exchange, upstreamProblem(this.upstream.name, error as Error));
  }

  #fail(exchange: Exchange, proxyRes: http.IncomingMessage | undefined, error: unknown): void {
    proxyRes?.destroy();
    this.options.writer.failure(exchange, error);
  }
}
