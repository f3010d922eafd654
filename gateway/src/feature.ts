import type { Endpoint } from '@app/shared/api-description/openapi';
import type { Lifecycle } from '@app/shared/platform/http/lifecycle';
import type { Registry } from 'prom-client';
import type { Logger } from '@app/shared/platform/logger';
import type { z } from 'zod';
import type { oas31, ZodOpenApiResponseObject } from 'zod-openapi';
import type { TokenVerifier } from './auth/tokens.js';
import type { BaseConfig } from './base-config.js';
import type { MemoryTier } from './cache/memory-tier.js';
import type { ResponseCache } from './cache/response-cache.js';
import type { Exchange } from './exchange.js';
import type { ConcurrencyLimitSettings } from './load-shedding/concurrency-limit.js';
import type { MemoryPressure, MemoryReader } from './load-shedding/overload.js';
import type { MethodKind } from '@app/shared/platform/http/method-kind';
import type { Stage } from './pipeline.js';
import type { ServiceHop } from './proxy/service-hop.js';
import type { Deadlines } from './proxy/upstream.js';
import type { ResolveEndpoints } from './proxy/upstream-agent.js';
import type { RateLimits } from './rate-limits/budgets.js';
import type { CacheClient } from './redis/client.js';
import type { ResponseHeaders, ResponseWriter } from './respond.js';
import type { Routing } from './routing/service-routes.js';
import type { ServedUpstream, Upstream } from './upstream-model.js';

/**
 * The places of the chain, in the order a request meets them. A feature puts each of its stages in
 * one; within a phase, stages run in the order of the feature list (features.ts). `arrive`: before
 * anything is known of the caller; `identify`: who it is; `count`: its budget; `admit`: refusals
 * decided so far answered; `route`: targets the API does not serve; `lookup`: answers the gateway
 * holds; `forward`: the service's answer; `last`: what no stage answered.
 */
export const PHASES = ['arrive', 'identify', 'count', 'admit', 'route', 'lookup', 'forward', 'last'] as const;
export type Phase = (typeof PHASES)[number];

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

/** What one feature makes for another, filled in as the features are made (in the feature list's order). */
export interface SharedParts {
  /** The way to each service, by name (proxy/). */
  hops?: ReadonlyMap<string, ServiceHop>;
  /** How short of memory the gateway is (load-shedding/). */
  pressure?: MemoryPressure;
  /** The gateway's deadlines (proxy/): the hops keep them, the API description states them. */
  deadlines?: Deadlines;
  /** The share of each service's slots (load-shedding/), which the hops keep. */
  concurrency?: ConcurrencyLimitSettings;
  /** The response cache (cache/), while CACHE_ENABLED. */
  cache?: ResponseCache;
  /** What a proxied write's settling does before its client hears back (cache/: what it renews). */
  onWriteSettled?: (exchange: Exchange, status: number) => Promise<void> | undefined;
}

/** What a feature is given when the gateway is made. */
export interface FeatureContext<Config> {
  config: Config;
  logger: Logger;
  lifecycle: Lifecycle;
  /** The registry of the gateway's metrics (GET /metrics, metrics/): a feature registers its own there (its `metrics.ts`). */
  metrics: Registry;
  writer: ResponseWriter;
  routing: Routing;
  upstreams: readonly ServedUpstream[];
  parts: GatewayParts;
  /** The Redis client the cache and the rate limits share: made on first ask (or `parts.redis`), closed after every feature. */
  redis(): CacheClient;
  shared: SharedParts;
  /** The features made before this one, in the list's order. */
  before: readonly GatewayFeature[];
  /** The response headers a browser page may read: every feature's `exposedHeaders`, once each. */
  exposedHeaders: readonly string[];
  /** Every feature's part of the API description, in the list's order. */
  descriptions: readonly FeatureDescription[];
}

/** A feature as made for one gateway: its stages and what it holds. */
export interface GatewayFeature {
  readonly name: string;
  /** Its stages, each in its phase; none while the feature is off. */
  stages?: Partial<Record<Phase, Stage>>;
  /** Adds its headers to every response the gateway writes, from what its stages decided (respond.ts). */
  responseHeaders?: ResponseHeaders;
  /** Endpoints it adds to the gateway's own, outside /api (its administration). */
  endpoints?: readonly Endpoint[];
  /** Why the gateway is not ready for traffic, while this feature holds it back (`GET /readyz`). */
  unreadyReason?(): string | undefined;
  /** Resolves once it is ready to take requests: the gateway listens after it. */
  ready?: Promise<void>;
  /** What it says about itself when the gateway starts listening. */
  details?: Record<string, unknown>;
  /** Stops its timers and closes the connections it made. */
  release?(): void | Promise<void>;
}

/** A proxied operation of a service, as the API description hands it to each feature. */
export interface ProxiedOperation {
  upstream: Upstream;
  method: string;
  kind: MethodKind;
  /** The path as the service's description names it (`/api/users/{id}`). */
  route: string;
  operation: oas31.OperationObject;
  deadlines: Deadlines;
}

/** What a feature adds to a proxied operation of the API description. */
export interface OperationFragment {
  /** Responses by status: the problems its stages answer with. */
  responses?: Record<number, ZodOpenApiResponseObject>;
  /** Headers it puts on every response, by name: their ids in `components.headers`. */
  headers?: Record<string, string>;
  /** The security requirements it checks (each one an alternative that suffices). */
  security?: oas31.SecurityRequirementObject[];
}

/** A feature's part of the API description. */
export interface FeatureDescription {
  /** Its response headers, by id in `components.headers`. */
  headers?: Record<string, z.ZodType>;
  /** What it adds to each operation a service describes. */
  operation?(proxied: ProxiedOperation): OperationFragment;
  /** Its bullet of the document's overview (Markdown, after the API's own ones). */
  overview?(upstreams: readonly Upstream[]): string;
  /** The security schemes its operations' requirements name (`components.securitySchemes`). */
  securitySchemes?(upstreams: readonly Upstream[]): Record<string, oas31.SecuritySchemeObject>;
}

/** The settings a feature's slice and the base settings give, as validated. */
export type SettingsOf<Shape extends z.ZodRawShape> = BaseConfig & (keyof Shape extends never ? unknown : z.infer<z.ZodObject<Shape>>);

/**
 * A feature of the gateway, declared in its folder and listed once (features.ts): its slice of
 * the configuration, the headers CORS must expose for it, its part of the API description, and how
 * it is made.
 */
export interface FeatureDefinition<Shape extends z.ZodRawShape = z.ZodRawShape> {
  readonly name: string;
  /** Its environment variables (merged into the gateway's schema, config.ts). */
  readonly config: Shape;
  /** Response headers of its own a browser page may read (CORS's `Access-Control-Expose-Headers`). */
  readonly exposedHeaders?: readonly string[];
  readonly description?: FeatureDescription;
  /** Problems of its settings taken together, which stop the gateway from starting. */
  configProblems?(config: SettingsOf<Shape>, parts: GatewayParts): string[];
  create(context: FeatureContext<SettingsOf<Shape>>): GatewayFeature;
}

/** A feature's definition, its settings' type inferred from its slice. */
export const defineFeature = <Shape extends z.ZodRawShape>(definition: FeatureDefinition<Shape>): FeatureDefinition<Shape> => definition;

/** The chain: every feature's stages, phase by phase, each phase in the features' order. Built once, when the gateway is made. */
export const chainOf = (features: readonly GatewayFeature[]): Stage[] =>
  PHASES.flatMap((phase) => features.flatMap((feature) => feature.stages?.[phase] ?? []));
