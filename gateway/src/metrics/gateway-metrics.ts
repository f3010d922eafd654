import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import type { IncomingMessage } from 'node:http';
import type { FinishedRequest } from '@app/shared/platform/http/observation';
import { connectionsWithoutRequest } from '@app/shared/platform/http/request-head-deadline';

type RequestLabels = { route: string; method: string; status: string };

/** A label set's events (requests, cache outcomes) counted since /metrics was last read. */
export interface Tally<Labels> {
  labels: Labels;
  uncounted: number;
}

const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A label set's requests and their durations: how many fell in each bucket (not cumulative; the last is +Inf), and their sum. */
interface RequestTally extends Tally<RequestLabels> {
  buckets: number[];
  count: number;
  sum: number;
}

/** One line of the histogram as prom-client's registry reads it: its own labels, and those of its label set. */
interface DurationLine {
  labels: { le?: number | string };
  sharedLabels: RequestLabels;
  value: number;
  metricName: string;
}

const DURATION = { name: 'gateway_http_request_duration_seconds', help: 'Time from request to response, by route, method and status.' };

/**
 * The request duration histogram, read from the tallies: a request adds to its tally's bucket,
 * where prom-client's `observe` would validate and hash its labels on every call.
 */
class TalliedHistogram extends Histogram<'route' | 'method' | 'status'> {
  constructor(
    registry: Registry,
    private readonly tallies: () => Iterable<RequestTally>,
  ) {
    super({ ...DURATION, labelNames: ['route', 'method', 'status'], buckets: DURATION_BUCKETS, registers: [registry] });
  }

  /**
   * Its lines in the form prom-client's own histogram gives them: the registry reads this method for
   * /metrics (it is not in prom-client's types), and `get` reads it too.
   */
  getForPromString() {
    const bucketName = `${DURATION.name}_bucket`;
    const values: DurationLine[] = [];
    for (const tally of this.tallies()) {
      const sharedLabels = tally.labels;
      let cumulative = 0;
      DURATION_BUCKETS.forEach((le, i) => {
        cumulative += tally.buckets[i] as number;
        values.push({ labels: { le }, sharedLabels, value: cumulative, metricName: bucketName });
      });
      values.push(
        { labels: { le: '+Inf' }, sharedLabels, value: tally.count, metricName: bucketName },
        { labels: {}, sharedLabels, value: tally.sum, metricName: `${DURATION.name}_sum` },
        { labels: {}, sharedLabels, value: tally.count, metricName: `${DURATION.name}_count` },
      );
    }
    return { ...DURATION, type: 'histogram', values, aggregator: 'sum' };
  }
}

/**
 * Adds what `tallies` counted since the last read to `counter` (from its `collect`, when /metrics is
 * read): a request then costs one addition, not prom-client's label validation and hashing.
 */
export function addTallies<Name extends string>(counter: Counter<Name>, tallies: Iterable<Tally<Record<Name, string>>>): void {
  for (const tally of tallies) {
    if (tally.uncounted === 0) continue;
    counter.inc(tally.labels, tally.uncounted);
    tally.uncounted = 0;
  }
}

/**
 * The gateway's Prometheus registry, served at GET /metrics, with the metrics of every request
 * (its count and duration by route, method and status) and of the process; each feature registers
 * its own metrics there from its folder (`metrics.ts`).
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  /** One tally per route, method and status, made once: none allocated per request. */
  readonly #tallies = new Map<string, Map<string, Map<number, RequestTally>>>();
  readonly #requests: Counter<'route' | 'method' | 'status'> = new Counter({
    name: 'gateway_http_requests_total',
    help: 'Requests answered, by route, method and status.',
    labelNames: ['route', 'method', 'status'],
    registers: [this.registry],
    collect: (): void => {
      addTallies(this.#requests, this.#requestTallies());
    },
  });

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
    // Registered with the registry, which reads it for /metrics; `requestFinished` adds to its tallies.
    new TalliedHistogram(this.registry, () => this.#requestTallies());
    // The event-loop delay histogram samples with a timer: at prom-client's default (every 10 ms) an
    // idle gateway woke a hundred times a second, disturbing whatever shares its core. Every 100 ms
    // still sees each delay longer than that, the ones that matter.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }

  readonly requestFinished = ({ request, method, path, status, seconds }: FinishedRequest): void => {
    const tally = this.#tallyOf(this.routeOf(request, path), method, status);
    tally.uncounted += 1;
    let bucket = 0;
    while (bucket < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[bucket] as number)) bucket++;
    (tally.buckets[bucket] as number)++;
    tally.count += 1;
    tally.sum += seconds;
  };

  *#requestTallies(): Iterable<RequestTally> {
    for (const byMethod of this.#tallies.values()) for (const byStatus of byMethod.values()) yield* byStatus.values();
  }

  // Bounded: routes are a handful of labels, methods those the gateway accepts, statuses three digits.
  #tallyOf(route: string, method: string, status: number): RequestTally {
    let byMethod = this.#tallies.get(route);
    if (!byMethod) this.#tallies.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let tally = byStatus.get(status);
    if (!tally) {
      const labels = { route, method, status: String(status) };
      byStatus.set(status, (tally = { labels, uncounted: 0, buckets: new Array<number>(DURATION_BUCKETS.length + 1).fill(0), count: 0, sum: 0 }));
    }
    return tally;
  }
}
