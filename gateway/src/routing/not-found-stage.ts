import { problems } from '@app/shared/platform/problem';
import type { Stage } from '../pipeline.js';
import type { ResponseWriter } from '../respond.js';

/** The last stage: 404 for an API path no service serves. */
export function notFound(writer: ResponseWriter): Stage {
  return {
    name: 'not found',
    run(exchange) {
      writer.problem(exchange, problems.notFound(`No route for ${exchange.req.method ?? 'GET'} ${exchange.path}`));
      return true;
    },
  };
}
