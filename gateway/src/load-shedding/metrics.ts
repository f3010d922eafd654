import { currentServerSpan } from '@app/shared/telemetry/spans';
import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * `gateway_overload_level` (the overload manager's level, overload.ts, read when /metrics is asked)
 * and `gateway_overload_shed_total`, in `registry`; returns what counts a request shed (and marks its trace).
 */
export function overloadMetrics(registry: Registry, overload: { level: number }): () => void {
  new Gauge({
    name: 'gateway_overload_level',
    help: 'The memory overload level: 0 normal, 1 closing connections, 2 storing no new cache entries, 3 shedding new requests.',
    registers: [registry],
    collect() {
      this.set(overload.level);
    },
  });
  const shed = new Counter({
    name: 'gateway_overload_shed_total',
    help: 'Requests refused with 503 because the gateway\'s memory was past OVERLOAD_SHED_PERCENT of its limit.',
    registers: [registry],
  });
  return () => {
    currentServerSpan()?.setAttribute('gateway.shed', true);
    shed.inc();
  };
}
