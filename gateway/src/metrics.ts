import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { FinishedRequest } from '@app/shared/platform/http';

export type CacheOutcome = 'hit' | 'miss' | 'bypass' | 'stale' | 'collapsed';

/** The gateway's Prometheus metrics, served at GET /metrics. */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #requests = new Counter({
    name: 'gateway_http_requests_total',
    help: 'Requests answered, by route, method and status.',
    labelNames: ['route', 'method', 'status'],
    registers: [this.registry],
  });
  readonly #duration = new Histogram({
    name: 'gateway_http_request_duration_seconds',
    help: 'Time from request to response, by route, method and status.',
    labelNames: ['route', 'method', 'status'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly #cache = new Counter({
    name: 'gateway_cache_outcomes_total',
    help: 'GET/HEAD requests under /api by cache outcome.',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly #shed = new Counter({
    name: 'gateway_shed_total',
    help: 'Requests refused with 503 because their upstream was at its concurrency limit, by upstream and kind (read, write).',
    labelNames: ['upstream', 'kind'],
    registers: [this.registry],
  });

  constructor(private readonly routeOf: (path: string) => string) {
    collectDefaultMetrics({ register: this.registry });
  }

  /** One labels object per route, method and status, made once: none allocated per request. */
  readonly #labels = new Map<string, Map<string, Map<number, { route: string; method: string; status: string }>>>();
  readonly #outcomes = new Map<CacheOutcome, { outcome: CacheOutcome }>();

  readonly requestFinished = ({ method, path, status, seconds }: FinishedRequest): void => {
    const labels = this.#labelsOf(this.routeOf(path), method, status);
    this.#requests.inc(labels);
    this.#duration.observe(labels, seconds);
  };

  /** `gateway_upstream_in_flight`: what each limit holds, read when /metrics is asked. */
  observeInFlight(limits: readonly { upstream: string; inFlight: { read: number; write: number } }[]): void {
    new Gauge({
      name: 'gateway_upstream_in_flight',
      help: 'Requests in flight to each upstream, by kind (read, write), as its concurrency limit counts them.',
      labelNames: ['upstream', 'kind'],
      registers: [this.registry],
      collect() {
        for (const limit of limits) {
          for (const [kind, count] of Object.entries(limit.inFlight)) this.set({ upstream: limit.upstream, kind }, count);
        }
      },
    });
  }

  /** `gateway_redis_up` and `gateway_cache_owed_invalidations`, read when /metrics is asked. */
  observeCache(cache: { state: { redisUp: boolean; owed: number } }): void {
    new Gauge({
      name: 'gateway_redis_up',
      help: 'Whether the cache uses Redis now (1), or judges it down and bypasses it (0).',
      registers: [this.registry],
      collect() {
        this.set(cache.state.redisUp ? 1 : 0);
      },
    });
    new Gauge({
      name: 'gateway_cache_owed_invalidations',
      help: 'Generation renewals and holds that writes asked for and Redis has not taken yet: their scopes are bypassed.',
      registers: [this.registry],
      collect() {
        this.set(cache.state.owed);
      },
    });
  }

  cacheOutcome(outcome: CacheOutcome): void {
    let labels = this.#outcomes.get(outcome);
    if (!labels) this.#outcomes.set(outcome, (labels = { outcome }));
    this.#cache.inc(labels);
  }

  // Bounded: routes are a handful of labels, methods those the gateway accepts, statuses three digits.
  #labelsOf(route: string, method: string, status: number) {
    let byMethod = this.#labels.get(route);
    if (!byMethod) this.#labels.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let labels = byStatus.get(status);
    if (!labels) byStatus.set(status, (labels = { route, method, status: String(status) }));
    return labels;
  }

  readonly shed = (limit: { upstream: string }, write: boolean): void => {
    this.#shed.inc({ upstream: limit.upstream, kind: write ? 'write' : 'read' });
  };
}
