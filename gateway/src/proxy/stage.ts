import type { Stage } from '../pipeline.js';
import type { ServiceHop } from './service-hop.js';

/** Every request for a service that no earlier stage answered goes to that service (service-hop.ts). */
export function proxyStage(hops: ReadonlyMap<string, ServiceHop>): Stage {
  return {
    name: 'proxy',
    run(exchange) {
      const hop = exchange.service && hops.get(exchange.service.upstream.name);
      if (!hop) return false;
      hop.forward(exchange);
      return true;
    },
  };
}
