import type { RequestListener } from 'node:http';
import { routerOf } from '@app/shared/api-description/openapi';
import { baseApp } from '@app/shared/platform/http/app';
import { problemHandler } from '@app/shared/platform/http/failures';
import { healthRoutes } from '@app/shared/platform/http/health';
import { exposeObservation } from '@app/shared/platform/http/observation';
import { notFound as expressNotFound } from '@app/shared/platform/http/routing';
import { defineFeature, type FeatureContext } from '../feature.js';
import { openApiRoutes } from './api-description.js';
import { ownEndpoints as ownEndpointsStage } from './stage.js';

/**
 * Express, for the gateway's own endpoints only (API traffic never goes through its router): the
 * probes, the API description and its page, and the endpoints the features before it add.
 */
function ownEndpointsApp(context: FeatureContext<unknown>): RequestListener {
  const { upstreams, lifecycle, shared, before, descriptions } = context;
  const { deadlines } = shared;
  if (!deadlines) throw new Error('The API description states the proxy\'s deadlines: list the proxy before the own endpoints (features.ts)');
  const app = baseApp();
  app.use(exposeObservation);
  app.use(openApiRoutes({ upstreams, deadlines, descriptions }));
  app.use(routerOf(before.flatMap((feature) => feature.endpoints ?? [])));
  // Ready while not shutting down, and while no feature holds it back. An upstream's health is its
  // own readiness probe's business.
  app.use(healthRoutes(lifecycle, async () => before.map((feature) => feature.unreadyReason?.()).find((reason) => reason !== undefined)));
  app.use(expressNotFound);
  app.use(problemHandler());
  return app;
}

/** The gateway's own endpoints, outside /api: answered by express in the `route` phase. Listed last: it serves what the others add. */
export const ownEndpoints = defineFeature({
  name: 'own endpoints',
  config: {},
  create(context) {
    return { name: 'own endpoints', stages: { route: ownEndpointsStage(ownEndpointsApp(context), context.writer) } };
  },
});
