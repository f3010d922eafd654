import type { RequestListener } from 'node:http';
import { observeResponse, type OnFinished } from '@app/shared/platform/http/observation';
import type { Logger } from '@app/shared/platform/logger';
import { requestTarget } from '@app/shared/platform/request-target';
import { Exchange } from './exchange.js';
import type { ResponseWriter } from './respond.js';
import type { Routing } from './routing/service-routes.js';

/**
 * One step of a request's way through the gateway, with one job. It answers the request (or takes
 * it over: a proxy, express) and says `true`, or says `false` and the next stage has it; a promise
 * of either when it waits (a token to verify, a Redis round trip). A stage that throws or rejects
 * has the request answered as a failure (a 500 unless it threw a problem).
 */
export interface Stage {
  readonly name: string;
  run(exchange: Exchange): boolean | Promise<boolean>;
}

/**
 * The gateway's request listener: every request becomes an Exchange when it arrives (its target in
 * canonical form, so every stage decides on the spelling the service will act on; its request id
 * and log line; its service) and goes through `stages` in order until one answers. The stages are
 * listed in one place, gateway.ts. A stage that answers at once costs no promise or closure: a
 * cache hit from memory is answered within this one call.
 */
export function pipeline(
  stages: readonly Stage[],
  options: { routing: Routing; writer: ResponseWriter; logger: Logger; onFinished: OnFinished },
): RequestListener {
  const { routing, writer, logger, onFinished } = options;
  const run = (exchange: Exchange, from: number): void => {
    for (let index = from; index < stages.length; index++) {
      let answered: boolean | Promise<boolean>;
      try {
        answered = (stages[index] as Stage).run(exchange);
      } catch (error) {
        writer.failure(exchange, error);
        return;
      }
      if (answered === true) return;
      if (answered !== false) {
        answered.then(
          (done) => done || run(exchange, index + 1),
          (error: unknown) => writer.failure(exchange, error),
        );
        return;
      }
    }
  };
  return (req, res) => {
    const target = requestTarget(req.url ?? '/');
    if (target) req.url = target.url;
    const observed = observeResponse(logger, req, res, onFinished);
    run(new Exchange(req, res, target, routing.service(target), observed), 0);
  };
}
