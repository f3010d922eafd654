import type { IncomingMessage, RequestListener } from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { baseApp } from './http/app.js';
import { problemHandler } from './http/failures.js';
import type { FinishedRequest } from './http/observation.js';
import { requestContext } from './http/observation.js';
import { allowOnly, notFound } from './http/routing.js';
import type { Logger } from './logger.js';
import { STATEMENT_KINDS, type DatabaseObserver, type PoolUse, type StatementKind } from './mysql.js';

/** A service process's Prometheus metrics (docs/architecture.md, "Metrics"), served on its metrics port. */

const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The route label of a request no route matched: its path would make a series per path. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * One label set's observations: how many fell in each bucket (not cumulative; the last is +Inf),
 * their count and sum, and how many the counter has not been given yet.
 */
class Tally<Labels extends Record<string, string>> {
  readonly buckets = new Array<number>(DURATION_BUCKETS.length + 1).fill(0);
  count = 0;
  sum = 0;
  uncounted = 0;

  constructor(readonly labels: Labels) {}

  observe(seconds: number): void {
    let bucket = 0;
    while (bucket < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[bucket] as number)) bucket++;
    (this.buckets[bucket] as number)++;
    this.count += 1;
    this.sum += seconds;
    this.uncounted += 1;
  }
}

/**
 * A histogram read from tallies, and a counter of the same observations: an observation adds to its
 * tally, where prom-client's `observe` and `inc` would validate and hash its labels on every call.
 */
function talliedHistogram<Name extends string>(
  registry: Registry,
  names: { histogram: string; counter: string; help: string },
  labelNames: Name[],
  tallies: () => Iterable<Tally<Record<Name, string>>>,
): void {
  const counter: Counter<Name> = new Counter({
    name: names.counter,
    help: names.help,
    labelNames,
    registers: [registry],
    collect() {
      for (const tally of tallies()) {
        if (tally.uncounted === 0) continue;
        counter.inc(tally.labels, tally.uncounted);
        tally.uncounted = 0;
      }
    },
  });
  const histogram = new Histogram<Name>({ name: names.histogram, help: names.help, labelNames, buckets: DURATION_BUCKETS, registers: [registry] });
  // The registry reads this method for /metrics (it is not in prom-client's types): the lines in the form its own histogram gives them.
  Object.assign(histogram, {
    getForPromString() {
      const bucketName = `${names.histogram}_bucket`;
      const values: { labels: { le?: number | string }; sharedLabels: Record<string, string>; value: number; metricName: string }[] = [];
      for (const tally of tallies()) {
        const sharedLabels = tally.labels;
        let cumulative = 0;
        DURATION_BUCKETS.forEach((le, i) => {
          cumulative += tally.buckets[i] as number;
          values.push({ labels: { le }, sharedLabels, value: cumulative, metricName: bucketName });
        });
        values.push(
          { labels: { le: '+Inf' }, sharedLabels, value: tally.count, metricName: bucketName },
          { labels: {}, sharedLabels, value: tally.sum, metricName: `${names.histogram}_sum` },
          { labels: {}, sharedLabels, value: tally.count, metricName: `${names.histogram}_count` },
        );
      }
      return { name: names.histogram, help: names.help, type: 'histogram', values, aggregator: 'sum' };
    },
  });
}

type RequestLabels = { route: string; method: string; status: string };

/**
 * The route template express matched a request with (`/api/products/:id`), or UNMATCHED_ROUTE:
 * never the path itself, whose ids would make a series each.
 */
export function routeTemplateOf(request: IncomingMessage): string {
  const { route, baseUrl } = request as IncomingMessage & { route?: { path?: unknown }; baseUrl?: string };
  return typeof route?.path === 'string' ? `${baseUrl ?? ''}${route.path}` : UNMATCHED_ROUTE;
}

/**
 * The metrics of one service process: requests by route template, method and status; the MySQL
 * pool and its statements by kind; write-deadline rollbacks, idempotent replays and migrations
 * applied; and prom-client's process metrics. Every series carries `service`.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  /** One tally per route, method and status, made once: none allocated per request. */
  readonly #requests = new Map<string, Map<string, Map<number, Tally<RequestLabels>>>>();
  readonly #statements = new Map<StatementKind, Tally<{ kind: StatementKind }>>(STATEMENT_KINDS.map((kind) => [kind, new Tally({ kind })]));
  readonly #writeDeadlineRollbacks: Counter;
  readonly #idempotencyReplays: Counter;
  readonly #migrationsApplied: Counter;

  /** `service`: its name in services.json (`users`), the label of every series. */
  constructor(service: string) {
    this.registry.setDefaultLabels({ service });
    const counter = (name: string, help: string) => new Counter({ name, help, registers: [this.registry] });
    this.#writeDeadlineRollbacks = counter('service_write_deadline_rollbacks_total', 'Writes rolled back because their request\'s write deadline (WRITE_DEADLINE_MS) passed before they could commit.');
    this.#idempotencyReplays = counter('service_idempotency_replays_total', 'Requests answered with the stored response of an earlier one with the same Idempotency-Key.');
    this.#migrationsApplied = counter('service_migrations_applied_total', 'Migrations this process applied at start (MIGRATE_ON_START).');
    talliedHistogram(
      this.registry,
      { histogram: 'service_http_request_duration_seconds', counter: 'service_http_requests_total', help: 'Requests answered, and the time from request to response, by route template, method and status.' },
      ['route', 'method', 'status'],
      () => this.#requestTallies(),
    );
    talliedHistogram(
      this.registry,
      { histogram: 'service_mysql_query_duration_seconds', counter: 'service_mysql_queries_total', help: 'MySQL statements run, and their time from sending to answer, by kind: select, insert, update, delete, other.' },
      ['kind'],
      () => this.#statements.values(),
    );
    // As the gateway's: the event-loop delay sampled every 100 ms, not 10 ms, so an idle process sleeps.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }

  /** Counts a request by `route` (a template: routeTemplateOf), its method and status. */
  requestFinished(route: string, { method, status, seconds }: FinishedRequest): void {
    let byMethod = this.#requests.get(route);
    if (!byMethod) this.#requests.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let tally = byStatus.get(status);
    if (!tally) byStatus.set(status, (tally = new Tally({ route, method, status: String(status) })));
    tally.observe(seconds);
  }

  *#requestTallies(): Iterable<Tally<RequestLabels>> {
    for (const byMethod of this.#requests.values()) for (const byStatus of byMethod.values()) yield* byStatus.values();
  }

  /** What a Database tells (its third argument). */
  readonly database: DatabaseObserver = {
    statement: (kind, seconds) => this.#statements.get(kind)?.observe(seconds),
    writeDeadlineRollback: () => this.#writeDeadlineRollbacks.inc(),
  };

  readonly idempotencyReplay = (): void => this.#idempotencyReplays.inc();

  migrationsApplied(count: number): void {
    this.#migrationsApplied.inc(count);
  }

  /** The pool's gauges, read from `pool` when /metrics is asked. */
  observePool(pool: { poolUse(): PoolUse }): void {
    const gauge = (name: string, help: string, read: (use: PoolUse, gauge: Gauge) => void, labelNames: string[] = []) =>
      new Gauge({
        name,
        help,
        labelNames,
        registers: [this.registry],
        collect() {
          read(pool.poolUse(), this);
        },
      });
    gauge(
      'service_mysql_pool_connections',
      "The MySQL pool's open connections, by state: in_use, idle.",
      (use, connections) => {
        connections.set({ state: 'in_use' }, use.inUse);
        connections.set({ state: 'idle' }, use.idle);
      },
      ['state'],
    );
    gauge('service_mysql_pool_limit', 'The most connections the MySQL pool opens (DATABASE_POOL_SIZE).', (use, limit) => limit.set(use.limit));
    gauge('service_mysql_pool_waiting', 'Requests waiting for a MySQL connection (at most DATABASE_QUEUE_LIMIT).', (use, waiting) => waiting.set(use.waiting));
  }
}

/** The metrics' own app, `GET /metrics`: what they tell is for the operator's scraper only, on a port clients are not given. */
export function metricsApp(metrics: ServiceMetrics, logger: Logger): RequestListener {
  const app = baseApp();
  app.use(requestContext(logger));
  app.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  app.all('/metrics', allowOnly(['GET']));
  app.use(notFound);
  app.use(problemHandler());
  return app;
}
