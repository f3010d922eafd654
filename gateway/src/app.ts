import type { RequestListener } from 'node:http';
import { allowOnly, baseApp, healthRoutes, type Lifecycle, notFound, problemHandler, requestContext } from '@app/shared/http';
import type { Logger } from '@app/shared/logger';
import { cachedReads, type CachedUpstream } from './cache/cached-reads.js';
import { withCacheHotPath } from './cache/hot-path.js';
import type { ResponseCache } from './cache/response-cache.js';
import { CacheScopes } from './cache/scope.js';
import { AccessPolicy } from './auth/policy.js';
import { withGuard, type GuardSettings } from './guard.js';
import { GatewayMetrics } from './metrics.js';
import { upstreamAgent } from './upstream-agent.js';
import { openApiRoutes } from './openapi.js';
import { servesPath, upstreamProxy, type Upstream } from './upstream.js';

export interface GatewayDependencies {
  upstreams: Upstream[];
  upstreamTimeoutMs: number;
  logger: Logger;
  lifecycle: Lifecycle;
  /** The Redis-backed GET cache; undefined when CACHE_ENABLED=false. */
  cache: ResponseCache | undefined;
  /** Authentication, scopes, rate limits and CORS, decided before the cache and express (guard.ts). */
  guard: GuardSettings & { publicProductReads: boolean };
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The gateway: the guard first (CORS, token, scope, rate limit), then cache hits (before express), then express with its own health and metrics
 * endpoints, cached reads, one proxy per service, and 404 for the rest. It does not listen.
 */
export function createApp({ upstreams, upstreamTimeoutMs, logger, lifecycle, cache, guard }: GatewayDependencies): RequestListener {
  const scopes = new CacheScopes(upstreams);
  const metrics = new GatewayMetrics((path) => scopes.route(path) ?? (['/healthz', '/readyz', '/metrics'].includes(path) ? path : 'other'));
  const targets: CachedUpstream[] = upstreams.map((upstream) => ({ upstream, agent: upstreamAgent(upstream.url) }));
  const upstreamFor = (path: string) => targets.find(({ upstream }) => servesPath(upstream, path));

  // A write the service may have applied (anything but a 4xx) renews what it affects before the
  // client hears back, so nobody reads the old data from the cache after that.
  const invalidateWrites = async (req: { method?: string; url?: string }, status: number) => {
    if (cache && WRITES.has(req.method ?? '') && (status < 400 || status >= 500)) await cache.invalidate(scopes.written(req.url ?? '/'));
  };

  const app = baseApp();
  app.use(requestContext(logger, metrics.requestFinished));
  app.use(openApiRoutes({ upstreams, timeoutMs: upstreamTimeoutMs }));
  // Ready while not shutting down: an upstream's health is its own readiness probe's business.
  app.use(healthRoutes(lifecycle));
  app.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  app.all('/metrics', allowOnly(['GET']));
  app.use(cachedReads({ cache, upstreamFor, timeoutMs: upstreamTimeoutMs, metrics }));
  for (const { upstream, agent } of targets) {
    app.use(upstreamProxy(upstream, { timeoutMs: upstreamTimeoutMs, agent, onSettled: invalidateWrites }));
  }
  app.use(notFound);
  app.use(problemHandler());
  const served = cache ? withCacheHotPath(app, { cache, scopes, logger, metrics }) : app;
  const policy = new AccessPolicy(upstreams, scopes, new Set(guard.publicProductReads ? ['products'] : []));
  return withGuard(served, { ...guard, policy, logger, onFinished: metrics.requestFinished });
}

export function upstreamsFrom(config: { USERS_SERVICE_URL: string; PRODUCTS_SERVICE_URL: string }): Upstream[] {
  return [
    { name: 'users', url: config.USERS_SERVICE_URL, prefix: '/api/users' },
    { name: 'products', url: config.PRODUCTS_SERVICE_URL, prefix: '/api/products' },
  ];
}
