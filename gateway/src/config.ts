import { createPublicKey, type JsonWebKey, KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { commonConfig, count, flag, hasScheme, HTTP_SCHEMES, listenAddress, megabytes, milliseconds, optionalUrl, port, seconds, unsetIfEmpty, url } from '@app/shared/platform/config';
import { DEV_AUDIENCE, DEV_ISSUER, DEV_PUBLIC_KEY_JWK } from '@app/shared/platform/dev-auth';
import { SERVICES_FILE } from '@app/shared/platform/services';
import { z } from 'zod';
import { CLAIM_PRESET_NAMES } from './auth/claims.js';
import { parseClusterNode } from './redis/client.js';

/** Signature algorithms a token may use: public-key ones only, so no `none` and no HS/RS key confusion. */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const;

/** A comma-separated list, each item checked by `item`. */
const list = (fallback: string, item: z.ZodType<string>, message: string) =>
  z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .default(fallback)
      .transform((value) => value.split(',').map((part) => part.trim()).filter((part) => part !== ''))
      .refine((items) => items.every((value) => item.safeParse(value).success), { message }),
  );

/** A key to verify tokens with: a PEM public key (SPKI) or a public JWK, as JSON. */
export type VerificationKey = KeyObject | { keys: object[] };

function parseVerificationKey(text: string): VerificationKey {
  const trimmed = text.trim();
  // A private key would be a secret in the gateway's environment: refuse it rather than derive its public half.
  if (!trimmed.startsWith('{')) {
    if (trimmed.includes('PRIVATE KEY')) throw new Error('a private key');
    return createPublicKey(trimmed);
  }
  const json = JSON.parse(trimmed) as { keys?: unknown; d?: unknown };
  if (Array.isArray(json.keys)) return { keys: json.keys as object[] };
  if (json.d !== undefined) throw new Error('a private key');
  return createPublicKey({ key: json as JsonWebKey, format: 'jwk' });
}

const verificationKey = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .optional()
    .transform((value, context) => {
      if (value === undefined) return undefined;
      try {
        const key = parseVerificationKey(value);
        if ('type' in key && key.type !== 'public') throw new Error('not a public key');
        return key;
      } catch {
        context.addIssue({ code: 'custom', message: 'must be a public key: PEM (SPKI), a JWK or a JWK Set, as JSON' });
        return z.NEVER;
      }
    }),
);

const isHttpUrl = (value: string) => hasScheme(value, HTTP_SCHEMES);

const origin = z.string().refine((value) => URL.canParse(value) && new URL(value).origin === value);

/** The environment the gateway reads (validated at start-up). */
export const configSchema = z.object({
  PORT: port(8080),
  /** Loopback unless a deployment says otherwise (the image sets 0.0.0.0): `npm start` trusts the development key. */
  HOST: listenAddress('127.0.0.1'),
  /** Where GET /metrics is served, and only there: a port the operator's scraper reaches, clients never. */
  METRICS_PORT: port(9464),
  METRICS_HOST: listenAddress('127.0.0.1'),
  /** Connections from one peer address on each port; 0: no cap (behind a proxy, every client has the proxy's address). */
  MAX_CONNECTIONS_PER_ADDRESS: count(256, 0, 1_000_000),
  /** The services to proxy (services.json): each one's path prefix, default port and kind of reads. */
  SERVICES_FILE: z.preprocess(unsetIfEmpty, z.string().default(SERVICES_FILE)),
  /** Where each listed service is, from its workspace name and port: `http://{service}:{port}` in Compose and Kubernetes. */
  UPSTREAM_URL_TEMPLATE: z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .default('http://127.0.0.1:{port}')
      .refine((value) => isHttpUrl(value.replaceAll('{service}', 'a-service').replaceAll('{port}', '1')), {
        message: 'must be an http or https URL, with {service} and {port} standing for each service\'s workspace and port',
      }),
  ),
  /** Exceptions to the template, as `name=url` pairs: `users=http://10.0.0.5:3001,products=…`. */
  GATEWAY_UPSTREAMS: list('', z.string().refine((pair) => /^[a-z][a-z0-9]*=/.test(pair) && isHttpUrl(pair.slice(pair.indexOf('=') + 1))), 'must be a comma-separated list of name=url, each URL http or https'),
  REDIS_URL: url(['redis:', 'rediss:'], 'redis://127.0.0.1:6379'),
  /**
   * Seed nodes of a Redis Cluster (`host:port,host:port,…`, or redis:// / rediss:// URLs with the
   * credentials): when set, the gateway uses this cluster instead of REDIS_URL.
   */
  REDIS_CLUSTER_NODES: list('', z.string().refine((item) => parseClusterNode(item) !== undefined), 'must be a comma-separated list of host:port, or redis:// or rediss:// URLs with a port'),
  /**
   * Put in front of every key the gateway keeps in Redis (cache entries, generations, holds, rate
   * limit counters), so that several deployments (or test runs) can share one Redis without reading
   * each other's entries. No braces: they would change the Redis Cluster hash tag of the keys.
   */
  REDIS_KEY_PREFIX: z.string().regex(/^[\w.:-]{0,64}$/, 'at most 64 letters, digits, _ . : or -').default(''),
  REDIS_COMMAND_TIMEOUT_MS: milliseconds(1_000),
  UPSTREAM_TIMEOUT_MS: milliseconds(10_000),
  // The services' default DATABASE_POOL_SIZE + DATABASE_QUEUE_LIMIT (see concurrency-limit.ts).
  UPSTREAM_CONCURRENCY_LIMIT: count(210, 2, 100_000),
  UPSTREAM_WRITE_SHARE_PERCENT: count(25, 1, 90),
  // The services' default WRITE_DEADLINE_MS plus a second for a COMMIT under way.
  SERVICE_WRITE_DEADLINE_MS: milliseconds(6_000),
  CACHE_ENABLED: flag(true),
  CACHE_TTL_SECONDS: seconds(60, 1),
  CACHE_STALE_SECONDS: seconds(300, 0),
  /** Bytes of hot entries each gateway keeps in memory in front of Redis; 0 turns that tier off. */
  CACHE_MEMORY_MB: megabytes(16, 4096),
  /** The memory the gateway may use (overload.ts); 0: its container's limit (cgroup), else 256. */
  GATEWAY_MEMORY_LIMIT_MB: megabytes(0, 1_048_576),
  /** The shares of that limit (and of V8's heap limit) at which it stops keep-alive, stops storing new cache entries, and sheds. */
  OVERLOAD_CLOSE_PERCENT: count(80, 1, 100),
  OVERLOAD_NO_STORE_PERCENT: count(90, 1, 100),
  OVERLOAD_SHED_PERCENT: count(95, 1, 100),
  /** The largest response body (identity) the cache stores, or compresses: a larger one is answered as it came. */
  CACHE_MAX_ENTRY_BYTES: count(262_144, 1_024, 1_073_741_824),
  /** The bytes of entries one caller may store per entry lifetime (TTL + stale), whatever it reads. */
  CACHE_CALLER_BYTES: count(8_388_608, 1_024, 1_099_511_627_776),
  AUTH_ENABLED: flag(true),
  AUTH_PUBLIC_KEY: verificationKey,
  /** Whether the development key (dev-keys/, its private half published) may be trusted on an address other machines reach. */
  AUTH_ALLOW_DEV_KEY: flag(false),
  AUTH_JWKS_URL: optionalUrl(HTTP_SCHEMES),
  /** Read the JWKS URL from AUTH_ISSUER's discovery document (OpenID Connect Discovery) instead. */
  AUTH_DISCOVERY: flag(false),
  /**
   * The least time between two fetches of the key set (AUTH_JWKS_URL or discovery), however many
   * tokens name unknown keys. A token naming an unknown key waits at most this and
   * AUTH_JWKS_TIMEOUT_MS for a fetch: 0.5 s and 1 s keep that answer (the key, or a 503 with the
   * provider down) under 2 s, while costing the provider at most two fetches a second.
   */
  AUTH_JWKS_COOLDOWN_MS: milliseconds(500),
  /** The longest a fetch (discovery document and key set) may take: a provider's edge answers in far less. */
  AUTH_JWKS_TIMEOUT_MS: milliseconds(1_000),
  /** The key set is fetched again when it is this old, so a key the provider retired stops working. */
  AUTH_JWKS_MAX_AGE_SECONDS: seconds(600, 1),
  /** The most bytes a key set or discovery document may have, and the most keys a set may hold: providers publish a few kilobytes, a few keys. */
  AUTH_JWKS_MAX_BYTES: count(262_144, 1_024, 16_777_216),
  AUTH_JWKS_MAX_KEYS: count(100, 1, 10_000),
  /** The most requests that may wait for a key set fetch at once (a flood of unknown keys included); beyond them, 503. */
  AUTH_JWKS_MAX_WAITING: count(4_096, 1, 1_000_000),
  AUTH_ISSUER: z.preprocess(unsetIfEmpty, z.string().default(DEV_ISSUER)),
  AUTH_AUDIENCE: z.preprocess(unsetIfEmpty, z.string().default(DEV_AUDIENCE)),
  AUTH_ALGORITHMS: list('ES256,RS256,EdDSA', z.enum(ASYMMETRIC_ALGORITHMS), `must be a comma-separated list of ${ASYMMETRIC_ALGORITHMS.join(', ')}`),
  AUTH_CLOCK_TOLERANCE_SECONDS: seconds(30, 0),
  /** The longest life (`exp` − `iat`) a token may have; a revocation is kept this long in Redis and in memory. */
  AUTH_MAX_TOKEN_LIFETIME_SECONDS: seconds(86_400, 60),
  /** Where the identity provider puts a token's scopes, audience, subject and id (auth/claims.ts). */
  AUTH_CLAIMS: z.preprocess(unsetIfEmpty, z.enum(CLAIM_PRESET_NAMES, { error: `must be one of ${CLAIM_PRESET_NAMES.join(', ')}` }).default('generic')),
  /** Services whose reads need no token (a public catalogue): only those services.json allows it for. */
  AUTH_PUBLIC_READS: list('', z.string(), 'must be a comma-separated list of service names'),
  RATE_LIMIT_ENABLED: flag(true),
  RATE_LIMIT_READS_PER_MINUTE: count(6_000, 1, 1_000_000_000),
  RATE_LIMIT_WRITES_PER_MINUTE: count(3_000, 1, 1_000_000_000),
  RATE_LIMIT_LEASE_POINTS: count(1_000, 1, 1_000_000),
  TRUSTED_PROXY_HOPS: count(0, 0, 10),
  /**
   * Whether the gateway continues a client's W3C trace context (a trusted proxy in front, which traces
   * too). By default it is not trusted: each request starts a new trace, linked to the client's.
   */
  TRACE_TRUST_CLIENT_CONTEXT: flag(false),
  /** Whether a request's trace carries its verified subject (`enduser.id`): personal data, so off by default. */
  TRACE_RECORD_SUBJECT: flag(false),
  CORS_ORIGINS: list('', origin, 'must be a comma-separated list of origins (scheme://host[:port])'),
  ...commonConfig,
});

/**
 * With authentication on, the gateway needs exactly one source of keys: a key, a JWKS URL, or the
 * issuer's discovery document (which needs the issuer to be an http or https URL). Checked after
 * parsing (not in the schema) so that each variable keeps its own default and the deployment checks
 * read them.
 */
export function authConfigProblems(config: { AUTH_ENABLED: boolean; AUTH_PUBLIC_KEY?: unknown; AUTH_JWKS_URL?: string; AUTH_DISCOVERY: boolean; AUTH_ISSUER: string }): string[] {
  if (!config.AUTH_ENABLED) return [];
  const sources = [config.AUTH_PUBLIC_KEY !== undefined, config.AUTH_JWKS_URL !== undefined, config.AUTH_DISCOVERY].filter(Boolean).length;
  const problems = sources === 1 ? [] : ['AUTH_PUBLIC_KEY, AUTH_JWKS_URL, AUTH_DISCOVERY: set exactly one of them while AUTH_ENABLED is true (or AUTH_ENABLED=false)'];
  if (config.AUTH_DISCOVERY && !isHttpUrl(config.AUTH_ISSUER)) problems.push('AUTH_ISSUER: must be an http or https URL with AUTH_DISCOVERY=true (its discovery document is read from it)');
  return problems;
}

/** Whether `address` is one only this machine reaches: 127.0.0.0/8 or ::1 (an IPv4-mapped one too). */
export function isLoopback(address: string): boolean {
  const v4 = address.replace(/^::ffff:/i, '');
  if (isIP(v4) === 4) return v4.startsWith('127.');
  return isIP(address) === 6 && /^(0{0,4}:){2,7}0{0,3}1$/.test(address);
}

const devKey = createPublicKey({ key: DEV_PUBLIC_KEY_JWK, format: 'jwk' });

/** Whether `key` is, or (a JWK Set) holds, the development key. */
function isDevKey(key: VerificationKey): boolean {
  const keys = 'keys' in key ? key.keys : [key];
  return keys.some((one) => {
    try {
      return (one instanceof KeyObject ? one : createPublicKey({ key: one as JsonWebKey, format: 'jwk' })).equals(devKey);
    } catch {
      return false;
    }
  });
}

/**
 * The development key's private half is in the repository: anyone who reaches a gateway that
 * trusts it can sign any token. Refused unless the gateway listens on loopback only, or
 * AUTH_ALLOW_DEV_KEY says the operator means it (a local stack whose network is the boundary).
 */
export function devKeyProblems(config: { HOST: string; AUTH_ENABLED: boolean; AUTH_PUBLIC_KEY?: VerificationKey; AUTH_ALLOW_DEV_KEY: boolean }): string[] {
  if (!config.AUTH_ENABLED || config.AUTH_ALLOW_DEV_KEY || isLoopback(config.HOST) || config.AUTH_PUBLIC_KEY === undefined || !isDevKey(config.AUTH_PUBLIC_KEY)) return [];
  return [`AUTH_PUBLIC_KEY: the development key (dev-keys/), whose private half is published, on HOST=${config.HOST}, which other machines reach: use your own key, HOST=127.0.0.1, or AUTH_ALLOW_DEV_KEY=true`];
}

export type GatewayConfig = z.infer<typeof configSchema>;
