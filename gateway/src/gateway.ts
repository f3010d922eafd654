import type { RequestListener } from 'node:http';
import { routerOf, type Endpoint } from '@app/shared/api-description/openapi';
import { ConfigError } from '@app/shared/platform/config';
import { baseApp } from '@app/shared/platform/http/app';
import { problemHandler } from '@app/shared/platform/http/failures';
import { healthRoutes, PROBE_PATHS } from '@app/shared/platform/http/health';
import { Lifecycle } from '@app/shared/platform/http/lifecycle';
import { exposeObservation, requestContext } from '@app/shared/platform/http/observation';
import { allowOnly, notFound as expressNotFound } from '@app/shared/platform/http/routing';
import { createLogger, type Logger } from '@app/shared/platform/logger';
import { configureServerSpans } from '@app/shared/telemetry/spans';
import { CLAIM_PRESETS } from './auth/claims.js';
import { revocationEndpoint } from './auth/revocation-endpoint.js';
import { recordRevocation, RevocationFeed, RevocationList, tokenClockOf } from './auth/revocations.js';
import { RemoteKeySet, remoteKeySettingsOf } from './auth/key-source.js';
import { TokenVerifier } from './auth/tokens.js';
import { Fills } from './cache/fills.js';
import { createMemoryTier, type MemoryTier } from './cache/memory-tier.js';
import { ResponseCache } from './cache/response-cache.js';
import { writeRenewal } from './cache/write-renewal.js';
import { authConfigProblems, devKeyProblems, type GatewayConfig } from './config.js';
import { upstreamSettings, type ServedUpstream } from './routing/upstreams.js';
import { addressCallerOf } from './rate-limits/caller.js';
import { exchangeOf } from './exchange.js';
import { GatewayMetrics } from './metrics/gateway-metrics.js';
import { openApiRoutes } from './own-endpoints/api-description.js';
import { containerMemoryLimitBytes, OverloadManager, overloadConfigProblems, overloadSettings, type MemoryReader } from './load-shedding/overload.js';
import { pipeline, type Stage } from './pipeline.js';
import { RateLimits } from './rate-limits/budgets.js';
import { createCacheClient, redisTarget, type CacheClient } from './redis/client.js';
import { ResponseWriter } from './respond.js';
import { Routing } from './routing/service-routes.js';
import { ServiceHop } from './proxy/service-hop.js';
import { authStages } from './auth/stages.js';
import { CacheRead } from './cache/read-stage.js';
import { canonicalOnly } from './routing/canonical-stage.js';
import { corsStages } from './cors/stages.js';
import { notFound } from './routing/not-found-stage.js';
import { overloadStage } from './load-shedding/overload-stage.js';
import { ownEndpoints } from './own-endpoints/stage.js';
import { proxyStage } from './proxy/stage.js';
import { rateLimitStage } from './rate-limits/stage.js';
import { probeByConnecting, ReplicaHealth, upstreamAgent, type ResolveEndpoints } from './proxy/upstream-agent.js';
import type { Deadlines } from './proxy/upstream.js';

/** Parts a caller may give instead of those the configuration names (tests: relays, clocks, a test key). */
export interface GatewayParts {
  logger?: Logger;
  lifecycle?: Lifecycle;
  /** The replicas a service's host name and port stand for: DNS unless given. */
  resolveReplicas?: ResolveEndpoints;
  /** Verifies tokens instead of the keys AUTH_PUBLIC_KEY, AUTH_JWKS_URL or AUTH_DISCOVERY name (while AUTH_ENABLED). */
  tokens?: TokenVerifier;
  /** The Redis client of the cache (and of the rate limits, unless `limits` is given) instead of REDIS_URL's or REDIS_CLUSTER_NODES'. */
  redis?: CacheClient;
  /** The cache's in-memory tier instead of CACHE_MEMORY_MB's; null for none. */
  memory?: MemoryTier | null;
  /** The rate limits instead of RATE_LIMIT_*'s; null for none. */
  limits?: RateLimits | null;
  /** The cache's clock (ms), for tests of expiry. */
  now?: () => number;
  /** How often the revocations are read from Redis (ms): 250 unless given. */
  revocationPollMs?: number;
  /** What the overload manager reads memory with: the process's own unless given. */
  readMemory?: MemoryReader;
}

export interface Gateway {
  handler: RequestListener;
  /** `GET /metrics`, for its own port (METRICS_PORT): never served where clients come in. */
  metricsHandler: RequestListener;
  logger: Logger;
  lifecycle: Lifecycle;
  cache: ResponseCache | undefined;
  /** What it says about itself when it starts listening. */
  details: Record<string, unknown>;
  /** Resolves once the revocations Redis holds have been read (or could not be): listen after it. */
  ready: Promise<void>;
  /** Closes its connections to the services, stops its timers and listeners, and closes the clients it made (not those it was given). */
  release(): Promise<void>;
}

/** Paths of the gateway's own endpoints that are their own route label in the metrics. */
const OWN_ROUTES = new Set(PROBE_PATHS);

/**
 * The gateway, wired from its configuration: its request listener (it does not listen) and what
 * it holds. Throws a ConfigError naming every setting that stops it from starting.
 */
export function createGateway(config: GatewayConfig, parts: GatewayParts = {}): Gateway {
  const { upstreams, problems } = upstreamSettings(config);
  const configProblems = [...(parts.tokens ? [] : [...authConfigProblems(config), ...devKeyProblems(config)]), ...problems, ...overloadConfigProblems(config)];
  if (configProblems.length > 0) throw new ConfigError(configProblems);
  const logger = parts.logger ?? createLogger('gateway', config.LOG_LEVEL);
  const lifecycle = parts.lifecycle ?? new Lifecycle();
  const redis = redisParts(config, logger, parts);
  const routing = new Routing(upstreams);
  const metrics = new GatewayMetrics((req, path) => {
    const target = exchangeOf(req)?.target;
    return routing.label(target) ?? (target && OWN_ROUTES.has(path) ? path : 'other');
  });
  // The gateway is where clients come in: their trace context is linked, not continued, unless
  // trusted. A request it does not sample needs no context: its hops are given the request's.
  configureServerSpans({
    continueClientTrace: config.TRACE_TRUST_CLIENT_CONTEXT,
    unsampledInContext: false,
    routeOf: (req) => routing.label(exchangeOf(req)?.target),
  });
  const { tokens, remoteKeys } = tokenParts(config, parts.tokens, logger, metrics);
  const writer = new ResponseWriter((outcome) => metrics.cacheOutcome(outcome));
  const overload = overloadManager(config, logger, metrics, parts.readMemory);
  const hops = serviceHops(config, upstreams, { writer, metrics, cache: redis.cache, resolveReplicas: parts.resolveReplicas });
  if (redis.cache) metrics.observeCache(redis.cache);
  const cors = config.CORS_ORIGINS.length > 0 ? corsStages(config.CORS_ORIGINS, writer) : undefined;
  const revocations = tokens && revocationParts(config, logger, parts.revocationPollMs);
  const auth = authStages({ tokens, revocations: revocations?.feed.list, writer, traceSubject: config.TRACE_RECORD_SUBJECT });
  const app = ownEndpointsApp(upstreams, config, { lifecycle, remoteKeys }, revocations && adminEndpoints(config, revocations.client, revocations.feed));
  // The order a request meets them in: docs/architecture.md draws it.
  const stages: (Stage | undefined)[] = [
    cors?.headers,
    overloadStage(overload, writer, metrics.overloadShed),
    auth.identify,
    redis.limits && rateLimitStage({ limits: redis.limits, trustedProxyHops: config.TRUSTED_PROXY_HOPS, writer }),
    cors?.preflight,
    tokens && auth.enforce,
    canonicalOnly(writer),
    ownEndpoints(app, writer),
    redis.cache && new CacheRead({ cache: redis.cache, fills: new Fills(), hops, writer, addressCaller: addressCallerOf(config.TRUSTED_PROXY_HOPS), pressure: overload }),
    proxyStage(hops),
    notFound(writer),
  ];
  return {
    handler: pipeline(stages.filter((stage) => stage !== undefined), { routing, writer, logger, onFinished: metrics.requestFinished }),
    metricsHandler: metricsApp(metrics, logger),
    logger,
    lifecycle,
    cache: redis.cache,
    details: { ...describe(config, upstreams, redis, tokens), memory: overload.settings },
    ready: revocations ? revocations.feed.start() : Promise.resolve(),
    release: async () => {
      overload.stop();
      remoteKeys?.stop();
      revocations?.feed.stop();
      revocations?.client.disconnect();
      for (const hop of hops.values()) hop.close();
      redis.cache?.close();
      await redis.release();
    },
  };
}

/** The overload manager (overload.ts), its level on /metrics, reading memory from now on. */
function overloadManager(config: GatewayConfig, logger: Logger, metrics: GatewayMetrics, readMemory: MemoryReader | undefined): OverloadManager {
  const overload = new OverloadManager(overloadSettings(config, containerMemoryLimitBytes()), { logger, read: readMemory });
  metrics.observeOverload(overload);
  overload.start();
  return overload;
}

/** The Redis-backed parts: the cache with its memory tier, and the rate limits; and how to close what was made here. */
function redisParts(config: GatewayConfig, logger: Logger, parts: GatewayParts) {
  const clientOptions = { commandTimeoutMs: 2 * config.REDIS_COMMAND_TIMEOUT_MS, keyPrefix: config.REDIS_KEY_PREFIX };
  const needsRedis = config.CACHE_ENABLED || (config.RATE_LIMIT_ENABLED && parts.limits === undefined);
  const target = redisTarget(config);
  // One client for the cache and the rate limits' counters. Its own timeout is a hard stop for every
  // command; the cache judges lateness itself, after the event loop has caught up (RedisHealth), so
  // the client's stop lies beyond that: a busy gateway must not cut replies that came in time.
  const made = !parts.redis && needsRedis ? createCacheClient(target, logger, clientOptions) : undefined;
  const redis = parts.redis ?? made;
  const madeMemory =
    parts.memory === undefined && redis && config.CACHE_ENABLED && config.CACHE_MEMORY_MB > 0
      ? createMemoryTier(target, config.CACHE_MEMORY_MB * 1024 * 1024, logger, clientOptions)
      : undefined;
  const memory = parts.memory ?? madeMemory;
  const cache =
    redis && config.CACHE_ENABLED
      ? new ResponseCache(
          redis,
          {
            ttlSeconds: config.CACHE_TTL_SECONDS,
            staleSeconds: config.CACHE_STALE_SECONDS,
            maxEntryBytes: config.CACHE_MAX_ENTRY_BYTES,
            callerBytes: config.CACHE_CALLER_BYTES,
            now: parts.now,
            breaker: { timeoutMs: config.REDIS_COMMAND_TIMEOUT_MS },
          },
          logger,
          memory,
        )
      : undefined;
  const limits =
    parts.limits !== undefined
      ? (parts.limits ?? undefined)
      : config.RATE_LIMIT_ENABLED
        ? new RateLimits(
            redis,
            { readsPerMinute: config.RATE_LIMIT_READS_PER_MINUTE, writesPerMinute: config.RATE_LIMIT_WRITES_PER_MINUTE, keyPrefix: 'rl', leasePoints: config.RATE_LIMIT_LEASE_POINTS },
            logger,
          )
        : undefined;
  const release = async () => {
    made?.disconnect();
    await madeMemory?.close();
  };
  return { cache, memory, limits, release };
}

/** The administration endpoints: revocations, recorded in Redis and known here at once. */
function adminEndpoints(config: GatewayConfig, redis: CacheClient, feed: RevocationFeed): Endpoint[] {
  return [revocationEndpoint(async (revocation) => {
    const madeAt = await recordRevocation(redis, revocation, tokenClockOf(config));
    await feed.caughtUp();
    return madeAt;
  })];
}

/**
 * The revoked tokens, in memory, kept in step with Redis over a connection of their own: their
 * polls never wait in line with (or time out among) the cache's commands on a request's path.
 */
function revocationParts(config: GatewayConfig, logger: Logger, pollMs = 250): { client: CacheClient; feed: RevocationFeed } {
  const client = createCacheClient(redisTarget(config), logger, { commandTimeoutMs: 2 * config.REDIS_COMMAND_TIMEOUT_MS, keyPrefix: config.REDIS_KEY_PREFIX });
  const list = new RevocationList(tokenClockOf(config));
  return { client, feed: new RevocationFeed(client, list, { pollMs, logger }) };
}

/**
 * What verifies tokens (while AUTH_ENABLED): `given`, or the configured key, or the identity
 * provider's key set (AUTH_JWKS_URL or AUTH_DISCOVERY), fetched from now on: /readyz waits for it.
 */
function tokenParts(config: GatewayConfig, given: TokenVerifier | undefined, logger: Logger, metrics: GatewayMetrics): { tokens?: TokenVerifier; remoteKeys?: RemoteKeySet } {
  if (given || !config.AUTH_ENABLED) return { tokens: given };
  const rules = {
    issuer: config.AUTH_ISSUER,
    audience: config.AUTH_AUDIENCE,
    algorithms: config.AUTH_ALGORITHMS,
    clockToleranceSeconds: config.AUTH_CLOCK_TOLERANCE_SECONDS,
    maxLifetimeSeconds: config.AUTH_MAX_TOKEN_LIFETIME_SECONDS,
    claims: CLAIM_PRESETS[config.AUTH_CLAIMS],
  };
  // authConfigProblems made sure exactly one source is set.
  if (config.AUTH_PUBLIC_KEY) return { tokens: new TokenVerifier({ publicKey: config.AUTH_PUBLIC_KEY }, rules) };
  const remoteKeys = new RemoteKeySet(remoteKeySettingsOf(config), { logger, onFetch: metrics.keyFetch });
  void remoteKeys.refresh();
  return { tokens: new TokenVerifier({ remote: remoteKeys }, rules), remoteKeys };
}

/** The gateway's deadlines, from its configuration: the hops keep them, the API description states them. */
const deadlinesOf = (config: GatewayConfig): Deadlines => ({ upstreamMs: config.UPSTREAM_TIMEOUT_MS, requestBodyMs: config.REQUEST_BODY_TIMEOUT_MS });

/** One hop per upstream, by name: its agent, proxy and concurrency limit (service-hop.ts). */
function serviceHops(
  config: GatewayConfig,
  upstreams: readonly ServedUpstream[],
  wiring: { writer: ResponseWriter; metrics: GatewayMetrics; cache: ResponseCache | undefined; resolveReplicas: ResolveEndpoints | undefined },
): Map<string, ServiceHop> {
  const { writer, metrics, cache } = wiring;
  const health = new ReplicaHealth(Date.now, probeByConnecting);
  const deadlines = deadlinesOf(config);
  const concurrency = { limit: config.UPSTREAM_CONCURRENCY_LIMIT, writeShare: config.UPSTREAM_WRITE_SHARE_PERCENT / 100 };
  const onSettled = cache && writeRenewal(cache, config.SERVICE_WRITE_DEADLINE_MS);
  const hops = new Map(
    upstreams.map((upstream) => {
      const agent = upstreamAgent(upstream.url, { resolve: wiring.resolveReplicas, health });
      const retryAgent = upstreamAgent(upstream.url, { resolve: wiring.resolveReplicas, health, fresh: true });
      const hop = new ServiceHop(upstream, { deadlines, agent, retryAgent, concurrency, writer, onShed: metrics.shed, onRetry: metrics.upstreamRetry, onSettled });
      return [upstream.name, hop];
    }),
  );
  metrics.observeInFlight([...hops.values()].map(({ limit }) => limit));
  return hops;
}

/** Express, for the gateway's own endpoints only: API traffic never goes through its router. */
function ownEndpointsApp(
  upstreams: readonly ServedUpstream[],
  config: GatewayConfig,
  readiness: { lifecycle: Lifecycle; remoteKeys: RemoteKeySet | undefined },
  admin: Endpoint[] = [],
): RequestListener {
  const app = baseApp();
  app.use(exposeObservation);
  app.use(openApiRoutes({ upstreams, deadlines: deadlinesOf(config) }));
  app.use(routerOf(admin));
  // Ready while not shutting down, once it has the provider's keys (an outage later leaves it ready:
  // the keys it has still work). An upstream's health is its own readiness probe's business.
  app.use(healthRoutes(readiness.lifecycle, async () => readiness.remoteKeys?.unreadyReason()));
  app.use(expressNotFound);
  app.use(problemHandler());
  return app;
}

/** The metrics' own app: what they tell (routes, versions, memory) is for the operator's scraper only. */
function metricsApp(metrics: GatewayMetrics, logger: Logger): RequestListener {
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

function describe(config: GatewayConfig, upstreams: readonly ServedUpstream[], redis: ReturnType<typeof redisParts>, tokens: TokenVerifier | undefined): Record<string, unknown> {
  return {
    upstreams: upstreams.map(({ name, url, cachedReads }) => ({ name, url, cachedReads })),
    cache: redis.cache ? { ...redis.cache.settings, memoryBytes: redis.memory?.maxBytes ?? 0 } : 'disabled',
    auth: tokens
      ? { keys: config.AUTH_PUBLIC_KEY ? 'AUTH_PUBLIC_KEY' : (config.AUTH_JWKS_URL ?? (config.AUTH_DISCOVERY ? 'AUTH_DISCOVERY' : 'given')), issuer: config.AUTH_ISSUER, audience: config.AUTH_AUDIENCE, claims: config.AUTH_CLAIMS, publicReads: config.AUTH_PUBLIC_READS }
      : 'disabled',
    rateLimits: redis.limits
      ? { readsPerMinute: config.RATE_LIMIT_READS_PER_MINUTE, writesPerMinute: config.RATE_LIMIT_WRITES_PER_MINUTE, leasePoints: config.RATE_LIMIT_LEASE_POINTS }
      : 'disabled',
    corsOrigins: config.CORS_ORIGINS,
  };
}
