import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { Lifecycle } from '@app/shared/platform/http/lifecycle';
import { createLogger, type Logger } from '@app/shared/platform/logger';
import { Database, type DatabaseLimits } from '@app/shared/platform/mysql';
import { listen, type RunningServer } from '@app/shared/platform/server';
import { migrateSchema, type ServiceDefinition, type ServiceDependencies } from '@app/shared/service';
import type { RequestListener } from 'node:http';
import { createGateway } from '../../gateway/src/gateway.js';
import { createMemoryTier, type MemoryTier } from '../../gateway/src/cache/memory-tier.js';
import type { ResponseCache } from '../../gateway/src/cache/response-cache.js';
import type { ConcurrencyLimitSettings } from '../../gateway/src/load-shedding/concurrency-limit.js';
import { configSchema as gatewayConfig } from '../../gateway/src/config.js';
import type { MemoryReader } from '../../gateway/src/load-shedding/overload.js';
import type { ResolveEndpoints } from '../../gateway/src/proxy/upstream-agent.js';
import type { TokenVerifier } from '../../gateway/src/auth/tokens.js';
import { RateLimits, type RateLimitSettings } from '../../gateway/src/rate-limits/budgets.js';
import { createCacheClient, type RedisTarget } from '../../gateway/src/redis/client.js';
import { createApp as createProductsApp, service as productsService } from '../../products-service/src/app.js';
import { createApp as createUsersApp, service as usersService } from '../../users-service/src/app.js';
import { serviceModules } from '../../tools/services.js';
import { testPublicKeyPem, testVerifier } from './auth.js';
import { testRedisTarget } from './redis-cluster.js';

/** Quiet unless TEST_LOG_LEVEL asks for logs. */
export const testLogger = createLogger('test', process.env.TEST_LOG_LEVEL ?? 'silent');

/** A logger whose lines a test can read. */
export function capturingLogger(name: string): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger(name, 'info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

function mysqlServerUrl(): string {
  const url = process.env.TEST_MYSQL_URL;
  if (!url) throw new Error('TEST_MYSQL_URL is not set: run the tests through jest (its global setup finds MySQL)');
  return url;
}

/** A URL naming a new, throwaway schema on the test MySQL server. */
export function throwawayDatabaseUrl(label: string): string {
  const url = new URL(mysqlServerUrl());
  url.pathname = `/t_${randomBytes(5).toString('hex')}_${label.replaceAll('-', '_')}`;
  return url.toString();
}

export async function dropSchema(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const schema = url.pathname.slice(1);
  url.pathname = '/';
  const connection = await mysql.createConnection(url.toString());
  await connection.query(`DROP DATABASE IF EXISTS \`${schema}\``);
  await connection.end();
}

/** Throwaway schema URLs for one test file (call it at the top level): each is dropped after all its tests. */
export function throwawayDatabases(): (label: string) => string {
  const made: string[] = [];
  afterAll(() => Promise.all(made.map(dropSchema)));
  return (label) => {
    const url = throwawayDatabaseUrl(label);
    made.push(url);
    return url;
  };
}

export interface RunningService {
  url: string;
  databaseUrl: string;
  db: Database;
  lifecycle: Lifecycle;
  running: RunningServer;
  close(): Promise<void>;
}

/** A service in this process with its real dependencies, on a fresh schema, on a free port. */
export async function startService(
  definition: ServiceDefinition,
  createApp: (dependencies: ServiceDependencies) => RequestListener,
  options: { poolUrl?: (databaseUrl: string) => string; limits?: Partial<DatabaseLimits>; logger?: Logger } = {},
): Promise<RunningService> {
  const databaseUrl = throwawayDatabaseUrl(definition.name);
  await migrateSchema(definition, databaseUrl, testLogger);
  // A caller may route the pool through a proxy it controls, once the schema exists.
  const db = new Database(options.poolUrl?.(databaseUrl) ?? databaseUrl, options.limits);
  const lifecycle = new Lifecycle();
  const running = await listen(createApp({ db, logger: options.logger ?? testLogger, lifecycle }), 0, '127.0.0.1');
  return {
    url: `http://127.0.0.1:${running.port}`,
    databaseUrl,
    db,
    lifecycle,
    running,
    close: async () => {
      await running.close(1_000);
      await db.close();
      await dropSchema(databaseUrl);
    },
  };
}

export const startUsersService = (options?: Parameters<typeof startService>[2]) => startService(usersService, createUsersApp, options);
export const startProductsService = (options?: Parameters<typeof startService>[2]) => startService(productsService, createProductsApp, options);

/**
 * Memory as a test's gateway's overload manager reads it unless the test says otherwise: none used.
 * The test's process holds the services, Jest and more besides the gateway, so its own memory says
 * nothing about the gateway's.
 */
export const calmMemory: MemoryReader = () => ({ rssBytes: 0, heapUsedBytes: 0, heapLimitBytes: 1 });

export interface RunningGateway {
  url: string;
  /** The gateway's metrics port, where it serves GET /metrics. */
  metricsUrl: string;
  running: RunningServer;
  cache: ResponseCache | undefined;
  close(): Promise<void>;
}

export interface GatewayCacheOptions {
  redisUrl?: RedisTarget;
  ttlSeconds?: number;
  staleSeconds?: number;
  now?: () => number;
  commandTimeoutMs?: number;
  /** Bytes of the in-memory tier in front of Redis (default 16 MiB, as the gateway's; 0: none). */
  memoryBytes?: number;
  /** Where the tier's tracked and subscriber connections go (default: redisUrl), to cut them apart. */
  memoryRedisUrls?: { tracked: RedisTarget; subscriber: RedisTarget };
  /** REDIS_KEY_PREFIX (default: this test run's, so that runs sharing a Redis never meet). */
  keyPrefix?: string;
  /** CACHE_MAX_ENTRY_BYTES and CACHE_CALLER_BYTES (default: the gateway's). */
  maxEntryBytes?: number;
  callerBytes?: number;
}

export interface GatewayGuardOptions {
  /** Verify tokens with the test key (default), or not at all (false). */
  auth?: boolean;
  /** Verify tokens with these keys instead of the test key (e.g. a JWKS URL the test serves). */
  tokens?: TokenVerifier;
  /**
   * Settings (AUTH_CLAIMS, AUTH_ISSUER, AUTH_AUDIENCE, AUTH_DISCOVERY, …) the gateway builds its own
   * verifier from, as in production, with the test key as AUTH_PUBLIC_KEY unless they name a
   * remote key set; instead of `tokens`.
   */
  authSettings?: Record<string, string>;
  /** AUTH_PUBLIC_READS: the services whose reads need no token. */
  publicReads?: string[];
  /**
   * Budgets (default: generous ones, so that only tests about limits meet them; false: none),
   * counted in `redisUrl` (default: the cache's Redis, if any, else memory). The key prefix is new
   * for each gateway unless given: pass one to make replicas share budgets.
   */
  rateLimits?: false | (Partial<RateLimitSettings> & { redisUrl?: RedisTarget });
  corsOrigins?: string[];
  trustedProxyHops?: number;
  /** How often it reads the revocations from Redis (ms; the gateway's default unless given). */
  revocationPollMs?: number;
}

/** The test key as the gateway's key source, unless `settings` name a remote key set (AUTH_JWKS_URL or AUTH_DISCOVERY). */
const testKeyUnlessRemote = (settings: Record<string, string>) =>
  settings.AUTH_JWKS_URL !== undefined || settings.AUTH_DISCOVERY === 'true' ? {} : { AUTH_PUBLIC_KEY: testPublicKeyPem };

export async function startGateway(options: {
  /** Each service's URL by name (GATEWAY_UPSTREAMS); a listed service not named is at its default port. */
  upstreams: Record<string, string>;
  upstreamTimeoutMs?: number;
  requestBodyTimeoutMs?: number;
  serviceWriteDeadlineMs?: number;
  logger?: Logger;
  /** The Redis cache (default: off, so tests of other behaviour see every request reach a service). */
  cache?: GatewayCacheOptions;
  /** The per-upstream concurrency limit (default: the gateway's defaults). */
  concurrency?: ConcurrencyLimitSettings;
  /** The replicas behind a service URL's host and port (default: DNS, i.e. the URL itself). */
  resolveReplicas?: ResolveEndpoints;
  guard?: GatewayGuardOptions;
  /** What its overload manager reads memory with (default: calmMemory). */
  readMemory?: MemoryReader;
  /** SERVICES_FILE: the services it proxies, and their settings (default: the repository's services.json). */
  servicesFile?: string;
}): Promise<RunningGateway> {
  const logger = options.logger ?? testLogger;
  const guardOptions = options.guard ?? {};
  // Only what the test sets: every other setting is the gateway's own default (gateway/src/config.ts).
  const settings: Record<string, string | number | undefined> = {
    GATEWAY_UPSTREAMS: Object.entries(options.upstreams)
      .map(([name, url]) => `${name}=${url}`)
      .join(','),
    AUTH_PUBLIC_READS: (guardOptions.publicReads ?? []).join(','),
    AUTH_ENABLED: String(guardOptions.auth !== false),
    CACHE_ENABLED: String(options.cache !== undefined),
    // The revocations are read from the test Redis, under this run's prefix, with the cache off too.
    REDIS_URL: process.env.TEST_REDIS_URL,
    REDIS_KEY_PREFIX: process.env.TEST_REDIS_KEY_PREFIX,
    CORS_ORIGINS: (guardOptions.corsOrigins ?? []).join(','),
    TRUSTED_PROXY_HOPS: guardOptions.trustedProxyHops,
    UPSTREAM_TIMEOUT_MS: options.upstreamTimeoutMs,
    REQUEST_BODY_TIMEOUT_MS: options.requestBodyTimeoutMs,
    SERVICE_WRITE_DEADLINE_MS: options.serviceWriteDeadlineMs,
    ...(guardOptions.authSettings && { ...testKeyUnlessRemote(guardOptions.authSettings), AUTH_ALGORITHMS: 'ES256', ...guardOptions.authSettings }),
    UPSTREAM_CONCURRENCY_LIMIT: options.concurrency?.limit,
    UPSTREAM_WRITE_SHARE_PERCENT: options.concurrency && Math.round(options.concurrency.writeShare * 100),
    CACHE_TTL_SECONDS: options.cache?.ttlSeconds,
    CACHE_STALE_SECONDS: options.cache?.staleSeconds,
    CACHE_MAX_ENTRY_BYTES: options.cache?.maxEntryBytes,
    CACHE_CALLER_BYTES: options.cache?.callerBytes,
    SERVICES_FILE: options.servicesFile,
  };
  const config = gatewayConfig.parse(Object.fromEntries(Object.entries(settings).flatMap(([name, value]) => (value === undefined ? [] : [[name, String(value)]]))));
  const { redis, memory, limitsRedis, limits } = await testRedisParts(options.cache, guardOptions, config.CACHE_MEMORY_MB * 1024 * 1024, logger);
  const gateway = createGateway(config, {
    logger,
    resolveReplicas: options.resolveReplicas,
    tokens: guardOptions.auth === false || guardOptions.authSettings ? undefined : (guardOptions.tokens ?? testVerifier()),
    redis: redis ?? undefined,
    memory: memory ?? null,
    limits: limits ?? null,
    now: options.cache?.now,
    revocationPollMs: guardOptions.revocationPollMs,
    readMemory: options.readMemory ?? calmMemory,
  });
  await gateway.ready;
  const running = await listen(gateway.handler, 0, '127.0.0.1');
  const metricsServer = await listen(gateway.metricsHandler, 0, '127.0.0.1');
  return {
    url: `http://127.0.0.1:${running.port}`,
    metricsUrl: `http://127.0.0.1:${metricsServer.port}`,
    running,
    cache: gateway.cache,
    close: async () => {
      await Promise.all([running.close(1_000), metricsServer.close(1_000)]);
      await gateway.release();
      redis?.disconnect();
      if (limitsRedis !== redis) limitsRedis?.disconnect();
      await memory?.close();
    },
  };
}

/**
 * The Redis clients of a test's gateway: the cache's, with this run's key prefix (and relays when
 * asked); its memory tier; and the rate limits, generous unless the test sets them, each gateway
 * with a new key prefix unless given.
 */
async function testRedisParts(cache: GatewayCacheOptions | undefined, guard: GatewayGuardOptions, defaultMemoryBytes: number, logger: Logger) {
  const redisUrl = cache?.redisUrl ?? testRedisTarget();
  const keyPrefix = cache?.keyPrefix ?? process.env.TEST_REDIS_KEY_PREFIX;
  const redis = cache && createCacheClient(redisUrl, logger, { commandTimeoutMs: cache.commandTimeoutMs, keyPrefix });
  if (redis) await new Promise((resolve) => redis.once('ready', resolve));
  const memoryBytes = cache?.memoryBytes ?? defaultMemoryBytes;
  const memoryUrls = cache?.memoryRedisUrls;
  const memory =
    redis && memoryBytes > 0 ? createMemoryTier(memoryUrls ?? redisUrl, memoryBytes, logger, { commandTimeoutMs: memoryUrls ? undefined : cache?.commandTimeoutMs, keyPrefix }) : undefined;
  if (memory) await untilTracking(memory);
  const limitOptions = guard.rateLimits === false ? undefined : (guard.rateLimits ?? {});
  const limitsRedis = limitOptions?.redisUrl ? createCacheClient(limitOptions.redisUrl, logger) : redis;
  if (limitsRedis && limitsRedis !== redis) await new Promise((resolve) => limitsRedis.once('ready', resolve));
  const limits =
    limitOptions &&
    new RateLimits(
      limitsRedis,
      { readsPerMinute: 1_000_000, writesPerMinute: 1_000_000, leasePoints: 1_000, keyPrefix: `test-rl-${randomBytes(6).toString('hex')}`, ...limitOptions },
      logger,
    );
  return { redis, memory, limitsRedis, limits };
}

/** Waits (at most 5 s) until Redis tracks what `memory` reads (or, with `on` false, until it noticed it does not). */
export async function untilTracking(memory: MemoryTier, on = true): Promise<void> {
  for (let attempt = 0; attempt < 250 && memory.tracking !== on; attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
  if (memory.tracking !== on) throw new Error(`Redis client tracking did not go ${on ? 'on' : 'off'} within 5 s`);
}

/**
 * Every service in services.json and the gateway in front of them. `users` and `products` are the
 * two the suites about the gateway's behaviour use; `services` has them all, by name.
 */
export async function startStack(options: { usersLogger?: Logger; gatewayLogger?: Logger; cache?: GatewayCacheOptions; guard?: GatewayGuardOptions } = {}) {
  const modules = await serviceModules('src');
  const started = await Promise.all(
    modules.map(async ({ entry, service, createApp }) => [entry.name, await startService(service, createApp, { logger: entry.name === 'users' ? options.usersLogger : undefined })] as const),
  );
  const services = Object.fromEntries(started) as Record<string, RunningService>;
  const urls = Object.fromEntries(started.map(([name, service]) => [name, service.url]));
  const gateway = await startGateway({
    upstreams: urls,
    logger: options.gatewayLogger,
    cache: options.cache,
    guard: options.guard,
  });
  return {
    users: services.users!,
    products: services.products!,
    services,
    /** Each service's URL by name, for a gateway of a test's own: `{ ...stack.urls, users: other }`. */
    urls,
    gateway,
    close: async () => {
      await gateway.close();
      await Promise.all(Object.values(services).map((service) => service.close()));
    },
  };
}
