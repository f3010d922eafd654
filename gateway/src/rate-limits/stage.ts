import { PROBE_PATHS } from '@app/shared/platform/http/health';
import { RETRY_AFTER_HEADER } from '@app/shared/platform/http/headers';
import { HttpProblem } from '@app/shared/platform/problem';
import { currentServerSpan } from '@app/shared/telemetry/spans';
import { addressCallerOf } from './caller.js';
import type { Exchange } from '../exchange.js';
import type { Stage } from '../pipeline.js';
import type { Budget, RateLimitOutcome, RateLimits } from './budgets.js';
import { overBudget } from './problems.js';
import type { ResponseHeaders, ResponseWriter } from '../respond.js';

/** The orchestrator's probes are never counted: a busy client must not make a replica look dead. */
const UNCOUNTED = new Set(PROBE_PATHS);

/**
 * Takes every request but the probes (the API, preflights, and the gateway's own endpoints:
 * the API description and the docs page cost work too) from its caller's budget: the verified
 * subject's, or its address's (`TRUSTED_PROXY_HOPS` proxies in front are trusted to name it). Over
 * the budget, 429 with Retry-After; a budget that cannot be counted now (Redis full), 503. The
 * RateLimit headers go on the response either way (`rateLimitHeaders`). A budget leased to this
 * replica is decided synchronously.
 */
export function rateLimitStage(options: { limits: RateLimits; trustedProxyHops: number; writer: ResponseWriter }): Stage {
  const { limits, writer } = options;
  const addressCaller = addressCallerOf(options.trustedProxyHops);

  const settle = (exchange: Exchange, outcome: RateLimitOutcome, budget: Budget): boolean => {
    exchange.rateLimit = outcome.headers;
    const retryAfter = outcome.headers[RETRY_AFTER_HEADER];
    if (outcome.allowed || retryAfter === undefined) return false;
    currentServerSpan()?.setAttribute('gateway.rate_limited', true);
    // Retry-After goes out with the other RateLimit headers (`rateLimitHeaders`).
    const problem = outcome.uncounted
      ? new HttpProblem('service-unavailable', `The ${budget} budget of this client cannot be counted now; retry after ${retryAfter} s`)
      : overBudget(budget, retryAfter);
    writer.problem(exchange, problem);
    return true;
  };

  return {
    name: 'rate limit',
    run(exchange) {
      if (!exchange.underApi && UNCOUNTED.has(exchange.path)) return false;
      const { req } = exchange;
      const budget: Budget = exchange.kind === 'write' ? 'write' : 'read';
      const caller = (exchange.caller ??= addressCaller(req));
      const outcome = limits.consume(budget, caller);
      return outcome instanceof Promise ? outcome.then((settled) => settle(exchange, settled, budget)) : settle(exchange, outcome, budget);
    },
  };
}

/** The RateLimit headers (and Retry-After) the request's budget gave it, on whatever answers it. */
export const rateLimitHeaders: ResponseHeaders = (exchange, headers) => {
  const limits = exchange.rateLimit;
  if (limits) for (const name in limits) headers.push(name, limits[name] as string);
};
