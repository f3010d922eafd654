import type { IncomingMessage, RequestListener } from 'node:http';
import { baseApp } from '@app/shared/platform/http/app';
import { refuseOversizedBodies } from '@app/shared/platform/http/bodies';
import { problemHandler } from '@app/shared/platform/http/failures';
import { healthRoutes } from '@app/shared/platform/http/health';
import type { Lifecycle } from '@app/shared/platform/http/lifecycle';
import { requestContext } from '@app/shared/platform/http/observation';
import { notFound } from '@app/shared/platform/http/routing';
import type { Logger } from '@app/shared/platform/logger';
import { configureServerSpans } from '@app/shared/telemetry/spans';
import type { RequestHandler } from 'express';
import { cachedReads, type CachedUpstream } from './cache/cached-reads.js';
import { Fills } from './cache/fills.js';
import { misses, withCacheHotPath } from './cache/hot-path.js';
import type { ResponseCache } from './cache/response-cache.js';
import { CacheScopes } from './cache/scope.js';
import { AccessPolicy } from './auth/policy.js';
import { ConcurrencyLimit, shedBeyondLimit, type ConcurrencyLimitSettings } from './concurrency-limit.js';
import { refuseNonCanonical, requestTargets, withFrontDoor } from './front-door.js';
import { sendRateLimitHeaders, withGuard, type GuardSettings } from './guard.js';
import { GatewayMetrics } from './metrics.js';
import { ReplicaHealth, upstreamAgent, type ResolveEndpoints } from './upstream-agent.js';
import { openApiRoutes } from './openapi.js';
import { withProxyPath, type ProxyHop } from './proxy-path.js';
import { ConfigError } from '@app/shared/platform/config';
import { upstreamSettings, type ServedUpstream } from './config.js';
import { servesPath, upstreamProxy } from './upstream.js';

export interface GatewayDependencies {
  upstreams: ServedUpstream[];
  upstreamTimeoutMs: number;
  /** How long a client may take to send its request body (408 after that). */
  requestBodyTimeoutMs: number;
  /**
   * SERVICE_WRITE_DEADLINE_MS: how long after the gateway gave up on a write the service may still
   * commit it (the services' WRITE_DEADLINE_MS, plus time for a COMMIT under way).
   */
  serviceWriteDeadlineMs: number;
  logger: Logger;
  lifecycle: Lifecycle;
  /** The Redis-backed GET cache; undefined when CACHE_ENABLED=false. */
  cache: ResponseCache | undefined;
  /** Requests in flight to each upstream, at most (see concurrency-limit.ts). */
  concurrency: ConcurrencyLimitSettings;
  /** The replicas a service's host name and port stand for: DNS unless given (tests give fixed ports). */
  resolveReplicas?: ResolveEndpoints;
  /** Authentication, scopes, rate limits and CORS, decided before the cache and express (guard.ts). */
  guard: GuardSettings;
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The gateway: the front door (every target in its canonical form), the guard (CORS, token and
 * scope, rate limit), cache hits (before express), the proxy hop for every request a cache fill
 * does not answer (before express too: proxy-path.ts),
 * then express: 404 for a target with no canonical form (never cached), its own health and metrics endpoints,
 * cached reads, one proxy per service, and 404 for the rest. It does not listen.
 */
export function createApp({
  upstreams,
  upstreamTimeoutMs,
  requestBodyTimeoutMs,
  serviceWriteDeadlineMs,
  logger,
  lifecycle,
  cache,
  concurrency,
  resolveReplicas,
  guard,
}: GatewayDependencies): RequestListener {
  const deadlines = { upstreamMs: upstreamTimeoutMs, requestBodyMs: requestBodyTimeoutMs };
  const scopes = new CacheScopes(upstreams);
  const ownEndpoints = new Set(['/healthz', '/readyz', '/metrics']);
  // By the target the front door found (none for a target without a canonical form: `other`).
  const metrics = new GatewayMetrics((req, path) => {
    const target = requestTargets.get(req);
    return (target && scopes.route(target)) ?? (target && ownEndpoints.has(path) ? path : 'other');
  });
  // A trace names a request by the same route template (a handful, never a raw id).
  configureServerSpans({ routeOf: (req) => scopes.route(requestTargets.get(req)) });
  const health = new ReplicaHealth();
  const targets: CachedUpstream[] = upstreams.map((upstream) => ({
    upstream,
    agent: upstreamAgent(upstream.url, { resolve: resolveReplicas, health }),
    limit: new ConcurrencyLimit(upstream.name, concurrency),
  }));
  const upstreamFor = (path: string) => targets.find(({ upstream }) => servesPath(upstream, path));
  metrics.observeInFlight(targets.map(({ limit }) => limit));
  if (cache) metrics.observeCache(cache);

  // A write the service may have applied (anything but a 4xx) renews what it affects before the
  // client hears back, so nobody reads the old data from the cache after that. One whose outcome is
  // unknown (5xx, timeout, connection lost) may still land until the services' write deadline: what
  // it affects stays out of the cache until then.
  const invalidateWrites = (req: IncomingMessage, status: number): Promise<void> | undefined => {
    if (!cache || !WRITES.has(req.method ?? '') || (status >= 400 && status < 500)) return undefined;
    return cache.invalidate(scopes.written(requestTargets.get(req)), status >= 500 ? { holdMs: serviceWriteDeadlineMs } : {});
  };
  const hops: ProxyHop[] = targets.map(({ upstream, agent, limit }) => ({
    serves: (path) => servesPath(upstream, path),
    proxy: upstreamProxy(upstream, { deadlines, agent, onSettled: invalidateWrites }),
    limit,
  }));

  const app = baseApp();
  app.use(sendRateLimitHeaders);
  app.use(requestContext(logger, metrics.requestFinished));
  app.use(refuseNonCanonical(metrics));
  const sendMetrics: RequestHandler = async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  };
  app.use(openApiRoutes({ upstreams, deadlines, metrics: sendMetrics }));
  // Ready while not shutting down: an upstream's health is its own readiness probe's business.
  app.use(healthRoutes(lifecycle));
  // Before anything reaches a service: a declared body over the limit is refused at once.
  app.use('/api', refuseOversizedBodies);
  const fills = new Fills();
  app.use(cachedReads({ cache, fills, upstreamFor, deadlines, metrics }));
  app.use(shedBeyondLimit((path) => upstreamFor(path)?.limit, metrics.shed));
  for (const { proxy } of hops) app.use(proxy);
  app.use(notFound);
  app.use(problemHandler());
  const proxied = withProxyPath(app, { hops, isCacheMiss: (req) => misses.has(req), requestBodyMs: requestBodyTimeoutMs, logger, metrics });
  const served = cache ? withCacheHotPath(proxied, { cache, fills, scopes, logger, metrics }) : proxied;
  const policy = new AccessPolicy(scopes, new Set(upstreams.filter(({ publicReads }) => publicReads).map(({ name }) => name)));
  return withFrontDoor(withGuard(served, { ...guard, policy, logger, onFinished: metrics.requestFinished }));
}

/** The upstreams the configuration names (see upstreamSettings); throws a ConfigError naming what is wrong. */
export function upstreamsFrom(config: Parameters<typeof upstreamSettings>[0]): ServedUpstream[] {
  const { upstreams, problems } = upstreamSettings(config);
  if (problems.length > 0) throw new ConfigError(problems);
  return upstreams;
}
