import type { IncomingMessage } from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { FinishedRequest } from './http/observation.js';
import { STATEMENT_KINDS, type DatabaseObserver, type PoolUse, type StatementKind } from './mysql.js';
import { DurationTally, RequestTallies, talliedCounterAndHistogram } from './tallies.js';

/** A service process's Prometheus metrics (docs/architecture.md, "Metrics"), served on its metrics port. */

/** The route label of a request no route matched: its path would make a series per path. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Each express route path in the form the API description and the gateway's metrics use: `/:id` as `/{id}`. */
const templates = new Map<string, string>();

/**
 * The route template a request matched (`/api/products/{id}`), or UNMATCHED_ROUTE: never the path
 * itself, whose ids would make a series each. Bounded: one entry per declared route.
 */
export function routeTemplateOf(request: IncomingMessage): string {
  const { route, baseUrl } = request as IncomingMessage & { route?: { path?: unknown }; baseUrl?: string };
  if (typeof route?.path !== 'string') return UNMATCHED_ROUTE;
  const path = `${baseUrl ?? ''}${route.path}`;
  let template = templates.get(path);
  if (template === undefined) templates.set(path, (template = path.replace(/:(\w+)/g, '{$1}')));
  return template;
}

/**
 * The metrics of one service process: requests by route template, method and status; the MySQL
 * pool and its statements by kind; write-deadline rollbacks, idempotent replays and migrations
 * applied; and prom-client's process metrics. Every series carries `service`.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly #requests = new RequestTallies();
  readonly #statements = new Map<StatementKind, DurationTally<{ kind: StatementKind }>>(STATEMENT_KINDS.map((kind) => [kind, new DurationTally({ kind })]));
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
    const requestsHelp = 'Requests answered, and the time from request to response, by route template, method and status.';
    talliedCounterAndHistogram(
      this.registry,
      { histogram: { name: 'service_http_request_duration_seconds', help: requestsHelp }, counter: { name: 'service_http_requests_total', help: requestsHelp } },
      ['route', 'method', 'status'],
      () => this.#requests,
    );
    const statementsHelp = 'MySQL statements run, and their time from sending to answer, by kind: select, insert, update, delete, other.';
    talliedCounterAndHistogram(
      this.registry,
      { histogram: { name: 'service_mysql_query_duration_seconds', help: statementsHelp }, counter: { name: 'service_mysql_queries_total', help: statementsHelp } },
      ['kind'],
      () => this.#statements.values(),
    );
    // As the gateway's: the event-loop delay sampled every 100 ms, not 10 ms, so an idle process sleeps.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }

  /** Counts a request by `route` (a template: routeTemplateOf), its method and status. */
  requestFinished(route: string, { method, status, seconds }: FinishedRequest): void {
    this.#requests.finished(route, method, status, seconds);
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
