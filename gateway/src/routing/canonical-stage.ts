import { noCanonicalForm } from '@app/shared/platform/http/routing';
import type { Stage } from '../pipeline.js';
import type { ResponseWriter } from '../respond.js';

/** 404 for a request target with no canonical form (shared/src/platform/request-target.ts): never cached, never proxied. */
export function canonicalOnly(writer: ResponseWriter): Stage {
  return {
    name: 'canonical targets only',
    run(exchange) {
      if (exchange.target) return false;
      writer.problem(exchange, noCanonicalForm());
      return true;
    },
  };
}
