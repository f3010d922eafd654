import type { RequestListener } from 'node:http';
import type { Registry } from 'prom-client';
import { baseApp } from './http/app.js';
import { problemHandler } from './http/failures.js';
import { requestContext } from './http/observation.js';
import { allowOnly, notFound } from './http/routing.js';
import type { Logger } from './logger.js';

/**
 * A process's metrics app, `GET /metrics` of `registry` (the gateway's and every service's): what
 * it tells (routes, versions, memory) is for the operator's scraper only, on a port clients are not given.
 */
export function metricsApp(registry: Registry, logger: Logger): RequestListener {
  const app = baseApp();
  app.use(requestContext(logger));
  app.get('/metrics', async (_req, res) => {
    res.type(registry.contentType).send(await registry.metrics());
  });
  app.all('/metrics', allowOnly(['GET']));
  app.use(notFound);
  app.use(problemHandler());
  return app;
}
