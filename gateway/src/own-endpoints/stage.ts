import type { RequestListener } from 'node:http';
import type { Stage } from '../pipeline.js';
import type { ResponseWriter } from '../respond.js';

/**
 * The gateway's own endpoints (`/healthz`, `/readyz`, `/metrics`, `/openapi.json`, `/docs`): every
 * request outside /api goes to `app`, an express app (gateway.ts) that answers them, or 404. API
 * traffic never goes through express.
 */
export function ownEndpoints(app: RequestListener, writer: ResponseWriter): Stage {
  return {
    name: 'own endpoints',
    run(exchange) {
      if (exchange.underApi) return false;
      writer.ownHeaders(exchange);
      app(exchange.req, exchange.res);
      return true;
    },
  };
}
