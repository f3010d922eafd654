import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
// With its .ts extension (rewritten to .js in dist/): scripts run this file with Node's type stripping.
import { OWNERSHIPS, ownershipPolicy, type Ownership } from './ownership-policy.ts';

/**
 * The one list of services (services.json at the repository root). The gateway's upstreams, the
 * dev start, the API description, the token script, the deployments and the tests all derive
 * from it, so adding a service is one entry there (docs/adding-a-service.md).
 */
export const SERVICES_FILE = fileURLToPath(new URL('../../../services.json', import.meta.url));

/**
 * The path the API lives under: each service serves `/api/<name>`; the processes' own endpoints
 * are outside it. Here rather than beside the request target, as the scripts import this file
 * from its source, which can name no other.
 */
export const API_PREFIX = '/api';

/** A service's name: a path segment, a scope prefix, a MySQL schema and user, a DNS label. */
const serviceName = z.string().regex(/^[a-z][a-z0-9]{0,30}$/, 'must be 1 to 31 lower-case letters or digits, starting with a letter');

/** A number of seconds a services.json entry may set, from `min` to a year. */
const entrySeconds = (min: number) => z.int(`must be a whole number of seconds from ${min} to 31536000`).min(min, `must be a whole number of seconds from ${min} to 31536000`).max(31_536_000, `must be a whole number of seconds from ${min} to 31536000`);

/** The bounds of a request body limit a services.json entry may set: 1 KiB to 16 MiB. */
const BODY_LIMIT_BOUNDS = { min: 1_024, max: 16 * 1_024 * 1_024 } as const;
const bodyLimitMessage = `must be a whole number of bytes from ${BODY_LIMIT_BOUNDS.min} (1 KiB) to ${BODY_LIMIT_BOUNDS.max} (16 MiB)`;
const bodyLimitBytes = z.int(bodyLimitMessage).min(BODY_LIMIT_BOUNDS.min, bodyLimitMessage).max(BODY_LIMIT_BOUNDS.max, bodyLimitMessage);

const entry = z
  .strictObject({
    name: serviceName,
    port: z.int().min(1).max(65535),
    /** The gateway caches its GETs. */
    cachedReads: z.boolean(),
    /** A deployment may serve its reads without a token (AUTH_PUBLIC_READS); never where its ownership forbids it. */
    publicReads: z.boolean(),
    /** Who may see and change its records (ownership-policy.ts). */
    owner: z.enum(OWNERSHIPS),
    /**
     * How long the gateway serves a cached read of it as fresh, and then as stale while the service
     * fails; each absent one is the gateway's CACHE_TTL_SECONDS or CACHE_STALE_SECONDS.
     */
    cache: z.strictObject({ ttlSeconds: entrySeconds(1).optional(), staleSeconds: entrySeconds(0).optional() }).optional(),
    /** The largest request body it takes, at the gateway and at the service; absent, BODY_LIMIT_BYTES (shared/src/platform/http/bodies.ts). */
    body: z.strictObject({ limitBytes: bodyLimitBytes }).optional(),
  })
  .superRefine((service, context) => {
    const forbidden = ownershipPolicy(service.owner).noPublicReads;
    if (service.publicReads && forbidden !== undefined) {
      context.addIssue({ code: 'custom', message: `publicReads must be false where owner is "${service.owner}": ${forbidden}`, path: ['publicReads'] });
    }
  });

const listFile = z.object({
  services: z
    .array(entry)
    .min(1)
    .refine((services) => new Set(services.map(({ name }) => name)).size === services.length, 'names must be unique')
    .refine((services) => new Set(services.map(({ port }) => port)).size === services.length, 'ports must be unique'),
});

/** The scope of the gateway's own administration (revoking tokens), beside the services' scopes. */
export const GATEWAY_ADMIN_SCOPE = 'gateway:admin';

/** One service as everything else sees it: its entry and the names derived from it. */
export interface ServiceEntry extends z.infer<typeof entry> {
  /** Its workspace folder, package, image, Compose service and Kubernetes name: `users-service`. */
  workspace: string;
  /** The path it serves (and everything below it): `/api/users`. */
  prefix: string;
  /** The scopes a token needs to read and to write it, and the scope that reads and writes every record. */
  scopes: { read: string; write: string; admin: string };
  /** Its MySQL schema (and user, in the deployments). */
  schema: string;
  /** Its METRICS_PORT's default (see FIRST_SERVICE_METRICS_PORT). */
  metricsPort: number;
}

/**
 * The metrics port of the list's first service; each next one's is one more. The gateway's is the
 * one before (9464), so `npm start` runs every process on one machine with none shared. In a
 * container every process has 9464 to itself (its image or deployment sets METRICS_PORT).
 */
export const FIRST_SERVICE_METRICS_PORT = 9465;

/** The scopes of the service named `name`: the one place their spelling is decided. */
export const scopesOfService = (name: string): ServiceEntry['scopes'] => ({ read: `${name}:read`, write: `${name}:write`, admin: `${name}:admin` });

function describeService(declared: z.infer<typeof entry>, index: number): ServiceEntry {
  const { name } = declared;
  return { ...declared, workspace: `${name}-service`, prefix: `${API_PREFIX}/${name}`, scopes: scopesOfService(name), schema: name, metricsPort: FIRST_SERVICE_METRICS_PORT + index };
}

/** The services `file` declares, checked; throws naming what is wrong. */
export function readServiceList(file: string = SERVICES_FILE): ServiceEntry[] {
  const result = listFile.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  if (!result.success) {
    throw new Error(`${file}: ${result.error.issues.map((issue) => `${issue.path.join('.') || 'services'}: ${issue.message}`).join('; ')}`);
  }
  return result.data.services.map(describeService);
}

/** The entry of the service `name` in `file`; throws when the list has none. */
function serviceEntry(name: string, file?: string): ServiceEntry {
  const found = readServiceList(file).find((service) => service.name === name);
  if (!found) throw new Error(`services.json declares no service "${name}"`);
  return found;
}

/** The ownership services.json declares for the service `name`; throws when it declares no such service. */
export const ownershipOf = (name: string): Ownership => serviceEntry(name).owner;

/** What a service process takes from its entry in services.json (serviceDefaults). */
export interface ServiceDefaults {
  name: string;
  /** Its name in services.json (`users`): the `service` label of its metrics. */
  entryName: string;
  defaultPort: number;
  /** Where it serves GET /metrics unless METRICS_PORT says otherwise (FIRST_SERVICE_METRICS_PORT). */
  defaultMetricsPort: number;
  defaultDatabaseUrl: string;
  /** Who may see and change its records: its entry's `owner`. */
  ownership: Ownership;
  /** The largest request body it takes: its entry's `body.limitBytes`; BODY_LIMIT_BYTES where it sets none. */
  bodyLimitBytes?: number;
}

/**
 * What a service process takes from its entry in `file` (services.json unless given): its name, its
 * ports and its schema on a local MySQL as defaults, its ownership and its body limit. Throws when
 * the file declares no service `name`.
 */
export function serviceDefaults(name: string, file?: string): ServiceDefaults {
  const service = serviceEntry(name, file);
  return {
    name: service.workspace,
    entryName: service.name,
    defaultPort: service.port,
    defaultMetricsPort: service.metricsPort,
    defaultDatabaseUrl: `mysql://root@127.0.0.1:3306/${service.schema}`,
    ownership: service.owner,
    ...(service.body && { bodyLimitBytes: service.body.limitBytes }),
  };
}
