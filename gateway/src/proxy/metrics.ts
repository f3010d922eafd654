import { currentServerSpan } from '@app/shared/telemetry/spans';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Kind } from '../load-shedding/concurrency-limit.js';

/** What the gauges read of a concurrency limit. */
type ObservedLimit = { upstream: string; inFlight: Record<Kind, number>; waiting: Record<Kind, number> };

/** The hops' counters, in `registry`: requests shed at their upstream's concurrency limit, and retries granted or refused. */
export function hopCounters(registry: Registry) {
  const shed = new Counter({
    name: 'gateway_shed_total',
    help: 'Requests refused with 503 because their upstream was at its concurrency limit, by upstream and kind (read, write).',
    labelNames: ['upstream', 'kind'],
    registers: [registry],
  });
  const retries = new Counter({
    name: 'gateway_upstream_retries_total',
    help: 'Requests sent to their upstream a second time, on a fresh connection, by upstream and reason: connect (no connection could be opened), reset (it was reset or closed before any of the response came).',
    labelNames: ['upstream', 'reason'],
    registers: [registry],
  });
  const retriesRefused = new Counter({
    name: 'gateway_upstream_retries_refused_total',
    help: 'Retries the retry budget refused (the request got its 502), by upstream and reason (connect, reset).',
    labelNames: ['upstream', 'reason'],
    registers: [registry],
  });
  return {
    shed: (limit: { upstream: string }, write: boolean): void => {
      currentServerSpan()?.setAttribute('gateway.shed', true);
      shed.inc({ upstream: limit.upstream, kind: write ? 'write' : 'read' });
    },
    /** Counts a retry its budget granted (`gateway_upstream_retries_total`), or refused. */
    upstreamRetry: (upstream: string, reason: 'connect' | 'reset', granted: boolean): void => {
      (granted ? retries : retriesRefused).inc({ upstream, reason });
    },
  };
}

/** `gateway_upstream_in_flight` and `gateway_upstream_waiting`, in `registry`: what each limit holds and has waiting, read when /metrics is asked. */
export function observeLimits(registry: Registry, limits: readonly ObservedLimit[]): void {
  const gauge = (name: string, help: string, counts: (limit: ObservedLimit) => Record<Kind, number>) =>
    new Gauge({
      name,
      help,
      labelNames: ['upstream', 'kind'],
      registers: [registry],
      collect() {
        for (const limit of limits) {
          for (const [kind, count] of Object.entries(counts(limit))) this.set({ upstream: limit.upstream, kind }, count);
        }
      },
    });
  gauge('gateway_upstream_in_flight', 'Requests in flight to each upstream, by kind (read, write), as its concurrency limit counts them.', (limit) => limit.inFlight);
  gauge('gateway_upstream_waiting', 'Requests waiting for a slot of their upstream’s concurrency limit, by kind (read, write).', (limit) => limit.waiting);
}
