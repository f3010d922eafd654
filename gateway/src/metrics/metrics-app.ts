import type { RequestListener } from 'node:http';
import { baseApp } from '@app/shared/platform/http/app';
import { problemHandler } from '@app/shared/platform/http/failures';
import { requestContext } from '@app/shared/platform/http/observation';
import { allowOnly, notFound as expressNotFound } from '@app/shared/platform/http/routing';
import type { Logger } from '@app/shared/platform/logger';
import type { GatewayMetrics } from './gateway-metrics.js';

/** The metrics' own app, `GET /metrics`: what they tell (routes, versions, memory) is for the operator's scraper only. */
export function metricsApp(metrics: GatewayMetrics, logger: Logger): RequestListener {
  const app = baseApp();
  app.use(requestContext(logger));
  app.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  app.all('/metrics', allowOnly(['GET']));
  app.use(expressNotFound);
  app.use(problemHandler());
  return app;
}
