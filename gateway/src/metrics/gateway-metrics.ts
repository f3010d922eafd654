import { collectDefaultMetrics, Counter, Registry } from 'prom-client';
import type { IncomingMessage } from 'node:http';
import type { FinishedRequest } from '@app/shared/platform/http/observation';
import { connectionsWithoutRequest } from '@app/shared/platform/http/request-head-deadline';
import { RequestTallies, talliedCounterAndHistogram } from '@app/shared/platform/tallies';

/**
 * The gateway's Prometheus registry, served at GET /metrics, with the metrics of every request
 * (its count and duration by route, method and status) and of the process; each feature registers
 * its own metrics there from its folder (`metrics.ts`).
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #requests = new RequestTallies();

  /** What connectionsWithoutRequest (the whole process's count) had when it was last added to the counter. */
  #connectionsWithoutRequestCounted = connectionsWithoutRequest.closed;
  readonly #connectionsWithoutRequest = new Counter({
    name: 'gateway_connections_without_request_closed_total',
    help: 'Connections closed because no complete request head came within REQUEST_HEAD_TIMEOUT_MS of accept, or of the response before it (plus the keep-alive time).',
    registers: [this.registry],
    collect: (): void => {
      this.#connectionsWithoutRequest.inc(connectionsWithoutRequest.closed - this.#connectionsWithoutRequestCounted);
      this.#connectionsWithoutRequestCounted = connectionsWithoutRequest.closed;
    },
  });

  /** `routeOf` labels a request by its route: `/api/users/{id}`, `/healthz`, … */
  constructor(private readonly routeOf: (request: IncomingMessage, path: string) => string) {
    talliedCounterAndHistogram(
      this.registry,
      {
        counter: { name: 'gateway_http_requests_total', help: 'Requests answered, by route, method and status.' },
        histogram: { name: 'gateway_http_request_duration_seconds', help: 'Time from request to response, by route, method and status.' },
      },
      ['route', 'method', 'status'],
      () => this.#requests,
    );
    // The event-loop delay histogram samples with a timer: at prom-client's default (every 10 ms) an
    // idle gateway woke a hundred times a second, disturbing whatever shares its core. Every 100 ms
    // still sees each delay longer than that, the ones that matter.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }

  // Bounded: routes are a handful of labels, methods those the gateway accepts, statuses three digits.
  readonly requestFinished = ({ request, method, path, status, seconds }: FinishedRequest): void => {
    this.#requests.finished(this.routeOf(request, path), method, status, seconds);
  };
}
