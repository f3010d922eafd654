import { baseApp, healthRoutes, type Lifecycle, notFound, problemHandler, requestContext } from '@app/shared/http';
import type { Logger } from '@app/shared/logger';
import { openApiRoutes } from './openapi.js';
import { upstreamProxy, type Upstream } from './upstream.js';

export interface GatewayDependencies {
  upstreams: Upstream[];
  upstreamTimeoutMs: number;
  logger: Logger;
  lifecycle: Lifecycle;
}

/** The gateway as an express app: its own health endpoints, one proxy per service, 404 for the rest. */
export function createApp({ upstreams, upstreamTimeoutMs, logger, lifecycle }: GatewayDependencies) {
  const app = baseApp();
  app.use(requestContext(logger));
  app.use(openApiRoutes({ upstreams, timeoutMs: upstreamTimeoutMs }));
  // Ready while not shutting down: an upstream's health is its own readiness probe's business.
  app.use(healthRoutes(lifecycle));
  for (const upstream of upstreams) app.use(upstreamProxy(upstream, { timeoutMs: upstreamTimeoutMs, logger }));
  app.use(notFound);
  app.use(problemHandler());
  return app;
}

export function upstreamsFrom(config: { USERS_SERVICE_URL: string; PRODUCTS_SERVICE_URL: string }): Upstream[] {
  return [
    { name: 'users', url: config.USERS_SERVICE_URL, prefix: '/api/users' },
    { name: 'products', url: config.PRODUCTS_SERVICE_URL, prefix: '/api/products' },
  ];
}
