import { PROBE_PATHS } from '@app/shared/platform/http/health';
import { retryAfter } from '@app/shared/platform/http/headers';
import { HttpProblem } from '@app/shared/platform/problem';
import { COOL_DOWN_MS, SHEDDING, type OverloadManager } from './overload.js';
import type { Stage } from '../pipeline.js';
import type { ResponseWriter } from '../respond.js';

const PROBES = new Set(PROBE_PATHS);

/**
 * What the overload manager's level means for a request (overload.ts), decided before any work is
 * done for it: at every level above normal its connection closes after the response (no new
 * keep-alive), and while shedding it is refused with 503, but for the probes (a gateway short of
 * memory is still alive and ready: it refuses work, not its orchestrator). The metrics port is
 * another server, never here. Healthy, a request costs one comparison.
 */
export function overloadStage(overload: Pick<OverloadManager, 'level'>, writer: ResponseWriter, onShed: () => void): Stage {
  // One problem for every request shed, made once: an HttpProblem records a stack trace when made.
  const shedding = new HttpProblem('service-unavailable', 'The gateway is short of memory and refuses new requests for now; try again shortly', {
    headers: retryAfter(Math.ceil(COOL_DOWN_MS / 1000)),
  });
  return {
    name: 'overload',
    run(exchange) {
      const { level } = overload;
      if (level === 0) return false;
      exchange.closeConnection = true;
      if (level < SHEDDING || PROBES.has(exchange.path)) return false;
      onShed();
      writer.problem(exchange, shedding);
      return true;
    },
  };
}
