import { Counter, Histogram, type Registry } from 'prom-client';

/**
 * Counting by tallies, for the gateway's and the services' metrics: an event adds to its label set's
 * tally, made once, and the tallies are added to prom-client's metrics when /metrics is read, where
 * prom-client's own `inc` and `observe` would validate and hash the labels on every call.
 */

/** A label set's events counted since /metrics was last read. */
export class Tally<Labels extends Record<string, string>> {
  uncounted = 0;

  constructor(readonly labels: Labels) {}
}

export const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A label set's events and their durations: how many fell in each bucket (not cumulative; the last is +Inf), their count and sum. */
export class DurationTally<Labels extends Record<string, string>> extends Tally<Labels> {
  readonly buckets = new Array<number>(DURATION_BUCKETS.length + 1).fill(0);
  count = 0;
  sum = 0;

  observe(seconds: number): void {
    let bucket = 0;
    while (bucket < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[bucket] as number)) bucket++;
    (this.buckets[bucket] as number)++;
    this.count += 1;
    this.sum += seconds;
    this.uncounted += 1;
  }
}

/** Adds what `tallies` counted since the last read to `counter` (from its `collect`, when /metrics is read). */
export function addTallies<Name extends string>(counter: Counter<Name>, tallies: Iterable<Tally<Record<Name, string>>>): void {
  for (const tally of tallies) {
    if (tally.uncounted === 0) continue;
    counter.inc(tally.labels, tally.uncounted);
    tally.uncounted = 0;
  }
}

export interface TalliedNames {
  counter: { name: string; help: string };
  histogram: { name: string; help: string };
}

/** A counter and a histogram of the same events, in `registry`, read from `tallies` when /metrics is asked. */
export function talliedCounterAndHistogram<Name extends string>(
  registry: Registry,
  names: TalliedNames,
  labelNames: Name[],
  tallies: () => Iterable<DurationTally<Record<Name, string>>>,
): void {
  const counter: Counter<Name> = new Counter({ ...names.counter, labelNames, registers: [registry], collect: () => addTallies(counter, tallies()) });
  const { name, help } = names.histogram;
  const histogram = new Histogram<Name>({ name, help, labelNames, buckets: DURATION_BUCKETS, registers: [registry] });
  // The registry reads this method for /metrics (it is not in prom-client's types): the lines in the form its own histogram gives them.
  Object.assign(histogram, {
    getForPromString() {
      const bucketName = `${name}_bucket`;
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
          { labels: {}, sharedLabels, value: tally.sum, metricName: `${name}_sum` },
          { labels: {}, sharedLabels, value: tally.count, metricName: `${name}_count` },
        );
      }
      return { name, help, type: 'histogram', values, aggregator: 'sum' };
    },
  });
}

type RequestLabels = { route: string; method: string; status: string };

/** One duration tally per route, method and status, each made once: none allocated per request. */
export class RequestTallies {
  readonly #byRoute = new Map<string, Map<string, Map<number, DurationTally<RequestLabels>>>>();

  finished(route: string, method: string, status: number, seconds: number): void {
    let byMethod = this.#byRoute.get(route);
    if (!byMethod) this.#byRoute.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let tally = byStatus.get(status);
    if (!tally) byStatus.set(status, (tally = new DurationTally({ route, method, status: String(status) })));
    tally.observe(seconds);
  }

  *[Symbol.iterator](): Iterator<DurationTally<RequestLabels>> {
    for (const byMethod of this.#byRoute.values()) for (const byStatus of byMethod.values()) yield* byStatus.values();
  }
}
