import type { RequestListener } from 'node:http';
import { ConfigError } from '@app/shared/platform/config';
import { PROBE_PATHS } from '@app/shared/platform/http/health';
import { Lifecycle } from '@app/shared/platform/http/lifecycle';
import { createLogger, type Logger } from '@app/shared/platform/logger';
import type { ResponseCache } from './cache/response-cache.js';
import type { GatewayConfig } from './config.js';
import { exchangeOf } from './exchange.js';
import { chainOf, type FeatureContext, type GatewayFeature, type GatewayParts, type SharedParts } from './feature.js';
import { FEATURES } from './features.js';
import { GatewayMetrics } from './metrics/gateway-metrics.js';
import { metricsApp } from '@app/shared/platform/metrics-app';
import { pipeline } from './pipeline.js';
import { createCacheClient, redisTarget, type CacheClient } from './redis/client.js';
import { redisClientOptions } from './redis/config.js';
import { ResponseWriter, type ResponseHeaders } from './respond.js';
import { Routing } from './routing/service-routes.js';
import { upstreamSettings } from './routing/upstreams.js';

export type { GatewayParts } from './feature.js';

export interface Gateway {
  handler: RequestListener;
  /** `GET /metrics`, for its own port (METRICS_PORT): never served where clients come in. */
  metricsHandler: RequestListener;
  logger: Logger;
  lifecycle: Lifecycle;
  cache: ResponseCache | undefined;
  /** What it says about itself when it starts listening. */
  details: Record<string, unknown>;
  /** Resolves once every feature is ready (the revocations Redis holds read, or found unreadable): listen after it. */
  ready: Promise<void>;
  /** Releases every feature (last made, first released), then the Redis client made here (not one it was given). */
  release(): Promise<void>;
}

/** Paths of the gateway's own endpoints that are their own route label in the metrics. */
const OWN_ROUTES = new Set(PROBE_PATHS);

/** The problems that stop the gateway from starting: its upstreams', and each feature's settings taken together. */
function configProblems(config: GatewayConfig, parts: GatewayParts, upstreamProblems: string[]): string[] {
  return [...upstreamProblems, ...FEATURES.flatMap((feature) => feature.configProblems?.(config, parts) ?? [])];
}

/**
 * The gateway, made from its configuration: each feature of the list (features.ts) in turn, and the
 * chain of their stages, phase by phase (feature.ts). Its request listener (it does not listen) and
 * what it holds. Throws a ConfigError naming every setting that stops it from starting.
 */
export function createGateway(config: GatewayConfig, parts: GatewayParts = {}): Gateway {
  const { upstreams, problems } = upstreamSettings(config);
  const stopping = configProblems(config, parts, problems);
  if (stopping.length > 0) throw new ConfigError(stopping);
  const logger = parts.logger ?? createLogger('gateway', config.LOG_LEVEL);
  const lifecycle = parts.lifecycle ?? new Lifecycle();
  const routing = new Routing(upstreams);
  const metrics = new GatewayMetrics((req, path) => {
    const target = exchangeOf(req)?.target;
    return routing.label(target) ?? (target && OWN_ROUTES.has(path) ? path : 'other');
  });
  const shared: SharedParts = {};
  const featureHeaders: ResponseHeaders[] = [];
  const writer = new ResponseWriter(featureHeaders);
  // One client for the cache and the rate limits, made when one of them first asks.
  let made: CacheClient | undefined;
  const redis = () => parts.redis ?? (made ??= createCacheClient(redisTarget(config), logger, redisClientOptions(config)));
  const features: GatewayFeature[] = [];
  const context: Omit<FeatureContext<GatewayConfig>, 'before'> = {
    config,
    logger,
    lifecycle,
    metrics: metrics.registry,
    writer,
    routing,
    upstreams,
    parts,
    redis,
    shared,
    exposedHeaders: [...new Set(FEATURES.flatMap((feature) => feature.exposedHeaders ?? []))],
    descriptions: FEATURES.flatMap((feature) => feature.description ?? []),
  };
  for (const feature of FEATURES) features.push(feature.create({ ...context, before: [...features] }));
  featureHeaders.push(...features.flatMap((feature) => feature.responseHeaders ?? []));
  return {
    handler: pipeline(chainOf(features), { routing, writer, logger, onFinished: metrics.requestFinished }),
    metricsHandler: metricsApp(metrics.registry, logger),
    logger,
    lifecycle,
    cache: shared.cache,
    details: Object.assign({}, ...features.map((feature) => feature.details)) as Record<string, unknown>,
    ready: Promise.all(features.map((feature) => feature.ready)).then(() => undefined),
    release: async () => {
      for (const feature of features.toReversed()) await feature.release?.();
      made?.disconnect();
    },
  };
}
