/**
 * A service process from its definition. Beside the three folders rather than in one: it puts all
 * three together (platform/ for the process, api-description/ for the document, resource/ for the
 * routes), and nothing in them depends on it.
 */
import type { RequestListener } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { RequestHandler } from 'express';
import { z } from 'zod';
import { commonConfig, connectionBudgetOf, count, flag, listenAddress, loadConfig, milliseconds, port, seconds, url } from './platform/config.js';
import { baseApp } from './platform/http/app.js';
import { BODY_LIMIT_BYTES } from './platform/http/bodies.js';
import { answerFailure, problemHandler } from './platform/http/failures.js';
import { REQUEST_ID_HEADER } from './platform/http/headers.js';
import { healthRoutes } from './platform/http/health.js';
import { Lifecycle } from './platform/http/lifecycle.js';
import { kindOf } from './platform/http/method-kind.js';
import { observeResponse, requestContext, type OnFinished } from './platform/http/observation.js';
import { canonicalTargetsOnly, notFound } from './platform/http/routing.js';
import { createLogger, type Logger } from './platform/logger.js';
import { routeTemplateOf, ServiceMetrics } from './platform/metrics.js';
import { metricsApp } from './platform/metrics-app.js';
import { migrate } from './platform/migrate.js';
import { Database, DEFAULT_WRITE_DEADLINE_MS } from './platform/mysql.js';
import { UUID_V7 } from './platform/request-target.js';
import type { ServiceDefaults } from './platform/services.js';
import { serve } from './platform/server.js';
import { configureServerSpans } from './telemetry/spans.js';
import { MySqlIdempotencyStore } from './resource/idempotency-store.js';
import { checkUniqueWithinOwner, resourceEngineMigrations } from './resource/migrations.js';
import { DEFAULT_IDEMPOTENCY_SCOPE_BYTES, DEFAULT_IDEMPOTENCY_TTL_SECONDS, type IdempotencyStore } from './resource/idempotency.js';
import type { ResourceRoutes } from './resource/routes.js';
import { apiDocument, describe, documentEndpoint, probeEndpoints, routerOf, type Endpoint, type OpenApiDocument } from './api-description/openapi.js';

/** What a service needs to run: everything else about the two services is the same. */
export interface ServiceDefinition extends ServiceDefaults {
  /** `<service>/migrations`, as a file URL relative to the compiled module. */
  migrations: URL;
  /** The routes, on the service's database and its store of idempotency keys, taking bodies of at most `bodyLimitBytes`. */
  routes: (db: Database, idempotency: IdempotencyStore, bodyLimitBytes: number) => ResourceRoutes;
  /** What `routes` serves, for its description: `resourceEndpoints` without a runtime. */
  api: Endpoint[];
  /** How `npm run seed` fills its table (scripts/seed.ts); a service without one is not seeded. */
  seed?: SeedColumns;
}

/**
 * A table and the SQL of each of its columns (but the id, version and timestamps) over `n`, the
 * row's number, and `@tag`, a tag of the seeding run: valid rows for the API, unique where need be.
 */
export interface SeedColumns {
  table: string;
  columns: Record<string, string>;
}

/** What a service serves: its probes, its document (sent by `send`) and its routes. */
const serviceEndpoints = (service: Pick<ServiceDefinition, 'name' | 'api'>, send?: RequestHandler) => [...probeEndpoints, documentEndpoint(`The description of ${service.name}.`, send), ...service.api];

/** The service's own API description: its routes and probes, as a client of the service sees them. */
export function serviceDocument(service: Pick<ServiceDefinition, 'name' | 'api'>): OpenApiDocument {
  const info = {
    title: service.name,
    version: '1.0.0',
    description: `The part of the API that ${service.name} serves. Clients use the gateway, whose \`GET /openapi.json\` merges the parts of every service.`,
  };
  const endpoints = serviceEndpoints(service);
  return apiDocument(info, describe(endpoints), endpoints.map(({ tag }) => tag));
}

/** `GET /openapi.json` (and HEAD, OPTIONS): a document that never changes while the process runs. */
function documentRoutes(service: ServiceDefinition) {
  const body = JSON.stringify(serviceDocument(service));
  const send: RequestHandler = (_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.type('application/json').send(body);
  };
  return routerOf(serviceEndpoints(service, send).filter(({ operations }) => operations.GET?.handlers));
}

export const serviceConfigSchema = (service: Pick<ServiceDefinition, 'defaultPort' | 'defaultMetricsPort' | 'defaultDatabaseUrl'>) =>
  z.object({
    PORT: port(service.defaultPort),
    /**
     * Loopback unless a deployment says otherwise (Compose and Kubernetes set 0.0.0.0): a service
     * trusts the subject header the gateway sets, so only the gateway's network may reach it.
     */
    HOST: listenAddress('127.0.0.1'),
    /** Where GET /metrics is served, and only there: a port the operator's scraper reaches, clients never. */
    METRICS_PORT: port(service.defaultMetricsPort),
    METRICS_HOST: listenAddress('127.0.0.1'),
    DATABASE_URL: url(['mysql:'], service.defaultDatabaseUrl),
    DATABASE_POOL_SIZE: count(10, 1, 1_000),
    // At least 1: mysql2 reads 0 as "no limit", which would let a slow database queue requests without end.
    DATABASE_QUEUE_LIMIT: count(200, 1, 100_000),
    MIGRATE_ON_START: flag(true),
    IDEMPOTENCY_TTL_SECONDS: seconds(DEFAULT_IDEMPOTENCY_TTL_SECONDS, 1),
    IDEMPOTENCY_SCOPE_BYTES: count(DEFAULT_IDEMPOTENCY_SCOPE_BYTES, 1_024, 2 ** 31 - 1),
    WRITE_DEADLINE_MS: milliseconds(DEFAULT_WRITE_DEADLINE_MS),
    ...commonConfig,
  });

export interface ServiceDependencies {
  db: Database;
  logger: Logger;
  lifecycle: Lifecycle;
  /** Where Idempotency-Keys are kept; by default the service's database, for 24 h. */
  idempotency?: IdempotencyStore;
  /** What counts its requests (none: not counted). */
  metrics?: ServiceMetrics;
}

/**
 * GET and HEAD of an item (`{path}/{id}` with a UUIDv7 id and no query: a canonical target, see
 * platform/request-target.ts) are answered before express does any work, by the same handler its
 * router runs for them, with the same request id, log line and problem answers: express's
 * per-request setup and routing cost a read more CPU than its database round trip. Everything else
 * goes to express.
 */
function withItemReads(app: RequestListener, resource: ResourceRoutes, logger: Logger, onFinished: OnFinished | undefined): RequestListener {
  const prefix = `${resource.path}/`;
  return (req, res) => {
    const url = req.url ?? '/';
    const id = url.startsWith(prefix) ? url.slice(prefix.length) : '';
    if (kindOf(req.method) !== 'read' || !UUID_V7.test(id)) {
      app(req, res);
      return;
    }
    // The read writes X-Request-Id with its other headers; a failure's problem sets it itself.
    const observed = observeResponse(logger, req, res, onFinished);
    resource.readItem(req, res, id, observed.requestId).catch((error: unknown) => {
      if (!res.headersSent) res.setHeader(REQUEST_ID_HEADER, observed.requestId);
      answerFailure(res, url, error, observed.log);
    });
  };
}

/** The HTTP handler of a service, from its dependencies. It does not listen. */
export function createServiceApp(service: ServiceDefinition, { db, logger, lifecycle, idempotency, metrics }: ServiceDependencies): RequestListener {
  const resource = service.routes(db, idempotency ?? new MySqlIdempotencyStore(db), service.bodyLimitBytes ?? BODY_LIMIT_BYTES);
  const app = baseApp();
  app.use(requestContext(logger, metrics && ((finished) => metrics.requestFinished(routeTemplateOf(finished.request), finished))));
  app.use(canonicalTargetsOnly);
  app.use((_req, _res, next) => db.boundWrites(next));
  app.use(resource.router);
  app.use(healthRoutes(lifecycle, () => db.unreadyReason()));
  app.use(documentRoutes(service));
  app.use(notFound);
  app.use(problemHandler());
  // One template for a resource's items, in spans and metrics, whether express or the item reads served the request.
  const items = `${resource.path}/`;
  const itemTemplate = `${items}{id}`;
  configureServerSpans({ routeOf: (req) => (req.url?.startsWith(items) ? itemTemplate : undefined) });
  return withItemReads(app, resource, logger, metrics && ((finished) => metrics.requestFinished(itemTemplate, finished)));
}

/** The resource engine's migrations, then the service's own; then its unique indexes checked against its ownership. */
export async function migrateSchema(service: ServiceDefinition, databaseUrl: string, logger: Logger): Promise<string[]> {
  const applied = await migrate({ databaseUrl, sources: [resourceEngineMigrations, { directory: fileURLToPath(service.migrations) }], logger });
  await checkUniqueWithinOwner(databaseUrl, service.ownership);
  return applied;
}

/** How often a replica deletes expired idempotency keys (each replica does; the DELETE is idempotent). */
const PURGE_INTERVAL_MS = 10 * 60_000;

/** The process: config, migrations, HTTP server, graceful shutdown. */
export async function runService(service: ServiceDefinition): Promise<void> {
  const config = loadConfig(serviceConfigSchema(service));
  const logger = createLogger(service.name, config.LOG_LEVEL);
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'));
  const metrics = new ServiceMetrics(service.entryName);
  try {
    if (config.MIGRATE_ON_START) metrics.migrationsApplied((await migrateSchema(service, config.DATABASE_URL, logger)).length);
  } catch (error) {
    logger.fatal({ err: error }, 'migrations failed; not starting');
    process.exit(1);
  }
  const limits = { connectionLimit: config.DATABASE_POOL_SIZE, queueLimit: config.DATABASE_QUEUE_LIMIT, writeDeadlineMs: config.WRITE_DEADLINE_MS };
  const db = new Database(config.DATABASE_URL, limits, metrics.database);
  metrics.observePool(db);
  const lifecycle = new Lifecycle();
  const idempotency = new MySqlIdempotencyStore(db, { ttlSeconds: config.IDEMPOTENCY_TTL_SECONDS, scopeBytes: config.IDEMPOTENCY_SCOPE_BYTES, onReplay: metrics.idempotencyReplay });
  const purge = setInterval(() => {
    idempotency.purgeExpired().catch((error: unknown) => logger.warn({ err: error }, 'could not purge expired idempotency keys'));
  }, PURGE_INTERVAL_MS).unref();
  await serve({
    name: service.name,
    handler: createServiceApp(service, { db, logger, lifecycle, idempotency, metrics }),
    port: config.PORT,
    host: config.HOST,
    metrics: { handler: metricsApp(metrics.registry, logger), port: config.METRICS_PORT, host: config.METRICS_HOST },
    lifecycle,
    logger,
    shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    listenSockets: config.LISTEN_SOCKETS,
    // No cap per address: a service's clients are the gateways, few addresses with many connections each.
    connections: connectionBudgetOf(config, 0),
    release: () => {
      clearInterval(purge);
      return db.close();
    },
  });
}

/** `npm run migrate -w <service>`: applies the migrations and exits. */
export async function runMigrations(service: ServiceDefinition): Promise<void> {
  const config = loadConfig(serviceConfigSchema(service));
  const logger = createLogger(`${service.name}-migrate`, config.LOG_LEVEL);
  try {
    await migrateSchema(service, config.DATABASE_URL, logger);
  } catch (error) {
    logger.fatal({ err: error }, 'migrations failed');
    process.exit(1);
  }
}
