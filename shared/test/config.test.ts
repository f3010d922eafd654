import { ConfigError, parseConfig } from '@app/shared/platform/config';
import type { z } from 'zod';
import { generateKeyPairSync, KeyObject } from 'node:crypto';
import { SERVICES_FILE } from '@app/shared/platform/services';
import { authConfigProblems, devKeyProblems, isLoopback } from '../../gateway/src/auth/config.js';
import { configSchema as gatewaySchema } from '../../gateway/src/config.js';
import { upstreamSettings } from '../../gateway/src/routing/upstreams.js';
import { DEV_PUBLIC_KEY_JWK } from '@app/shared/platform/dev-auth';
import { configSchema as productsSchema } from '../../products-service/src/config.js';
import { configSchema as usersSchema } from '../../users-service/src/config.js';

/** The problems of the ConfigError that parsing `env` throws. */
function problemsOf(schema: z.ZodObject, env: NodeJS.ProcessEnv): string[] {
  try {
    parseConfig(schema, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be refused`);
}

/** The variables the problems name, sorted. */
const named = (problems: string[]) => problems.map((problem) => problem.split(':', 1)[0]).sort();

const gatewayDefaults = {
  PORT: 8080,
  HOST: '127.0.0.1',
  METRICS_PORT: 9464,
  METRICS_HOST: '127.0.0.1',
  MAX_CONNECTIONS_PER_ADDRESS: 256,
  SERVICES_FILE: SERVICES_FILE,
  UPSTREAM_URL_TEMPLATE: 'http://127.0.0.1:{port}',
  GATEWAY_UPSTREAMS: [],
  REDIS_KEY_PREFIX: '',
  REDIS_URL: 'redis://127.0.0.1:6379',
  REDIS_CLUSTER_NODES: [],
  REDIS_COMMAND_TIMEOUT_MS: 1_000,
  UPSTREAM_TIMEOUT_MS: 10_000,
  REQUEST_BODY_TIMEOUT_MS: 30_000,
  UPSTREAM_CONCURRENCY_LIMIT: 210,
  UPSTREAM_WRITE_SHARE_PERCENT: 25,
  SERVICE_WRITE_DEADLINE_MS: 6_000,
  CACHE_ENABLED: true,
  CACHE_TTL_SECONDS: 60,
  CACHE_STALE_SECONDS: 300,
  AUTH_ENABLED: true,
  AUTH_ALLOW_DEV_KEY: false,
  AUTH_DISCOVERY: false,
  AUTH_JWKS_COOLDOWN_MS: 500,
  AUTH_JWKS_TIMEOUT_MS: 1_000,
  AUTH_JWKS_MAX_AGE_SECONDS: 600,
  AUTH_JWKS_MAX_BYTES: 262_144,
  AUTH_JWKS_MAX_KEYS: 100,
  AUTH_JWKS_MAX_WAITING: 4_096,
  AUTH_ISSUER: 'rest-microservices-dev',
  AUTH_AUDIENCE: 'rest-microservices',
  AUTH_CLAIMS: 'generic',
  AUTH_ALGORITHMS: ['ES256', 'RS256', 'EdDSA'],
  AUTH_CLOCK_TOLERANCE_SECONDS: 30,
  AUTH_MAX_TOKEN_LIFETIME_SECONDS: 86_400,
  AUTH_PUBLIC_READS: [],
  RATE_LIMIT_ENABLED: true,
  RATE_LIMIT_READS_PER_MINUTE: 6000,
  RATE_LIMIT_WRITES_PER_MINUTE: 3000,
  RATE_LIMIT_LEASE_POINTS: 1000,
  TRUSTED_PROXY_HOPS: 0,
  TRACE_TRUST_CLIENT_CONTEXT: false,
  TRACE_RECORD_SUBJECT: false,
  CORS_ORIGINS: [],
  CACHE_MEMORY_MB: 16,
  CACHE_MAX_ENTRY_BYTES: 262_144,
  CACHE_CALLER_BYTES: 8_388_608,
  GATEWAY_MEMORY_LIMIT_MB: 0,
  OVERLOAD_CLOSE_PERCENT: 80,
  OVERLOAD_NO_STORE_PERCENT: 90,
  OVERLOAD_SHED_PERCENT: 95,
  LOG_LEVEL: 'info',
  SHUTDOWN_TIMEOUT_MS: 15_000,
  LISTEN_SOCKETS: 64,
  REQUEST_HEAD_TIMEOUT_MS: 10_000,
  MAX_CONNECTIONS: 4096,
};

const services = [
  { name: 'users-service', schema: usersSchema, port: 3001, metricsPort: 9465, databaseUrl: 'mysql://root@127.0.0.1:3306/users' },
  { name: 'products-service', schema: productsSchema, port: 3002, metricsPort: 9466, databaseUrl: 'mysql://root@127.0.0.1:3306/products' },
];

describe('the gateway configuration', () => {
  it('proxies every service in services.json, at the template unless GATEWAY_UPSTREAMS says otherwise', () => {
    const config = parseConfig(gatewaySchema, { UPSTREAM_URL_TEMPLATE: 'http://{service}:{port}', GATEWAY_UPSTREAMS: 'users=http://10.0.0.5:4001', AUTH_PUBLIC_READS: 'products' });
    const { upstreams, problems } = upstreamSettings(config);
    expect(problems).toEqual([]);
    expect(upstreams.filter(({ name }) => ['users', 'products'].includes(name))).toEqual([
      { name: 'users', prefix: '/api/users', url: 'http://10.0.0.5:4001', cachedReads: true, publicReads: false, owner: 'all' },
      { name: 'products', prefix: '/api/products', url: 'http://products-service:3002', cachedReads: true, publicReads: true, owner: 'none' },
    ]);
  });

  it('refuses a service the list does not name, and public reads the list does not allow', () => {
    const config = parseConfig(gatewaySchema, { GATEWAY_UPSTREAMS: 'nothing=http://10.0.0.5:4001', AUTH_PUBLIC_READS: 'users,nothing' });
    expect(upstreamSettings(config).problems).toEqual([
      `GATEWAY_UPSTREAMS: nothing: no such service in ${SERVICES_FILE}`,
      'AUTH_PUBLIC_READS: users: its reads may not be public (services.json)',
      `AUTH_PUBLIC_READS: nothing: no such service in ${SERVICES_FILE}`,
    ]);
    expect(upstreamSettings(parseConfig(gatewaySchema, { SERVICES_FILE: '/nonexistent/services.json' })).problems).toEqual([
      expect.stringMatching(/^SERVICES_FILE: ENOENT/),
    ]);
  });

  it('names every bad variable at once, with its value', () => {
    const problems = problemsOf(gatewaySchema, {
      PORT: 'abc',
      UPSTREAM_TIMEOUT_MS: '-1',
      UPSTREAM_URL_TEMPLATE: 'ftp://{service}:{port}',
      GATEWAY_UPSTREAMS: 'users=not a url',
      REDIS_URL: 'http://127.0.0.1:6379',
      LOG_LEVEL: 'loud',
      SHUTDOWN_TIMEOUT_MS: '1.5',
    });
    expect(named(problems)).toEqual(
      ['GATEWAY_UPSTREAMS', 'LOG_LEVEL', 'PORT', 'REDIS_URL', 'SHUTDOWN_TIMEOUT_MS', 'UPSTREAM_TIMEOUT_MS', 'UPSTREAM_URL_TEMPLATE'].sort(),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        'PORT: must be a port number from 0 to 65535 (got "abc")',
        'UPSTREAM_TIMEOUT_MS: must be a whole, positive number of milliseconds (got "-1")',
        'GATEWAY_UPSTREAMS: must be a comma-separated list of name=url, each URL http or https (got "users=not a url")',
        'REDIS_URL: must be a URL with scheme redis or rediss (got "http://127.0.0.1:6379")',
        'LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent (got "loud")',
      ]),
    );
  });

  it('puts every problem in the error message', () => {
    expect(() => parseConfig(gatewaySchema, { PORT: '70000', LOG_LEVEL: 'loud' })).toThrow(
      /^Invalid configuration:\n {2}- PORT: .*\n {2}- LOG_LEVEL: /,
    );
  });

  it('uses the defaults when variables are unset', () => {
    expect(parseConfig(gatewaySchema, {})).toEqual(gatewayDefaults);
  });

  it('treats an empty variable as unset', () => {
    const empty = Object.fromEntries(Object.keys(gatewayDefaults).map((name) => [name, '']));
    expect(parseConfig(gatewaySchema, empty)).toEqual(gatewayDefaults);
  });

  it('reads valid values, converting numbers', () => {
    expect(
      parseConfig(gatewaySchema, {
        PORT: '9000',
        UPSTREAM_URL_TEMPLATE: 'https://{service}.internal:{port}',
        GATEWAY_UPSTREAMS: 'users=http://10.0.0.5:3001',
        REDIS_URL: 'rediss://cache:6380',
        REDIS_CLUSTER_NODES: 'cache-0:6379, cache-1:6379',
        UPSTREAM_TIMEOUT_MS: '250',
        REQUEST_BODY_TIMEOUT_MS: '5000',
        UPSTREAM_CONCURRENCY_LIMIT: '32',
        UPSTREAM_WRITE_SHARE_PERCENT: '50',
        SERVICE_WRITE_DEADLINE_MS: '2500',
        LOG_LEVEL: 'debug',
        SHUTDOWN_TIMEOUT_MS: '3000',
        LISTEN_SOCKETS: '8',
        REQUEST_HEAD_TIMEOUT_MS: '2000',
        CACHE_ENABLED: 'false',
        CACHE_TTL_SECONDS: '5',
        CACHE_STALE_SECONDS: '0',
        AUTH_JWKS_URL: 'https://id.example/.well-known/jwks.json',
        AUTH_ALGORITHMS: 'RS256, PS256',
        AUTH_PUBLIC_READS: 'products',
        RATE_LIMIT_READS_PER_MINUTE: '100',
        TRUSTED_PROXY_HOPS: '1',
        CORS_ORIGINS: 'https://app.example,http://localhost:5173',
        CACHE_MEMORY_MB: '0',
      }),
    ).toEqual({
      ...gatewayDefaults,
      AUTH_JWKS_URL: 'https://id.example/.well-known/jwks.json',
      AUTH_ALGORITHMS: ['RS256', 'PS256'],
      AUTH_PUBLIC_READS: ['products'],
      RATE_LIMIT_READS_PER_MINUTE: 100,
      TRUSTED_PROXY_HOPS: 1,
      CORS_ORIGINS: ['https://app.example', 'http://localhost:5173'],
      PORT: 9000,
      UPSTREAM_URL_TEMPLATE: 'https://{service}.internal:{port}',
      GATEWAY_UPSTREAMS: ['users=http://10.0.0.5:3001'],
      REDIS_URL: 'rediss://cache:6380',
      REDIS_CLUSTER_NODES: ['cache-0:6379', 'cache-1:6379'],
      REDIS_COMMAND_TIMEOUT_MS: 1_000,
      UPSTREAM_TIMEOUT_MS: 250,
      REQUEST_BODY_TIMEOUT_MS: 5000,
      UPSTREAM_CONCURRENCY_LIMIT: 32,
      UPSTREAM_WRITE_SHARE_PERCENT: 50,
      SERVICE_WRITE_DEADLINE_MS: 2500,
      LOG_LEVEL: 'debug',
      SHUTDOWN_TIMEOUT_MS: 3000,
      LISTEN_SOCKETS: 8,
      REQUEST_HEAD_TIMEOUT_MS: 2000,
      CACHE_ENABLED: false,
      CACHE_TTL_SECONDS: 5,
      CACHE_STALE_SECONDS: 0,
      CACHE_MEMORY_MB: 0,
    });
  });

  it('ignores variables it does not read', () => {
    expect(parseConfig(gatewaySchema, { HOME: '/root', PATH: '/usr/bin', DATABASE_URL: 'nonsense' })).toEqual(gatewayDefaults);
  });

  it.each([
    ['PORT', '65536'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['PORT', '1e3'],
    ['PORT', '0x50'],
    ['PORT', ' 80'],
    ['UPSTREAM_TIMEOUT_MS', '0'],
    ['UPSTREAM_TIMEOUT_MS', '1.5'],
    ['UPSTREAM_TIMEOUT_MS', 'ten'],
    ['UPSTREAM_URL_TEMPLATE', '{service}:{port}'],
    ['GATEWAY_UPSTREAMS', 'users'],
    ['GATEWAY_UPSTREAMS', 'users=ftp://x'],
    ['LOG_LEVEL', 'INFO'],
    ['CACHE_ENABLED', 'yes'],
    ['CACHE_TTL_SECONDS', '0'],
    ['CACHE_STALE_SECONDS', '-1'],
    ['UPSTREAM_CONCURRENCY_LIMIT', '1'],
    ['UPSTREAM_WRITE_SHARE_PERCENT', '0'],
    ['UPSTREAM_WRITE_SHARE_PERCENT', '95'],
    ['AUTH_ALGORITHMS', 'HS256'],
    ['AUTH_ALGORITHMS', 'none'],
    ['AUTH_ALGORITHMS', 'ES256,none'],
    ['AUTH_PUBLIC_KEY', 'not a key'],
    ['AUTH_PUBLIC_KEY', '{"kty":"oct","k":"c2VjcmV0"}'],
    ['AUTH_PUBLIC_KEY', generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()],
    ['AUTH_PUBLIC_KEY', JSON.stringify(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' }))],
    ['AUTH_JWKS_URL', 'file:///etc/keys.json'],
    ['AUTH_DISCOVERY', 'yes'],
    ['AUTH_JWKS_COOLDOWN_MS', '0'],
    ['AUTH_JWKS_MAX_AGE_SECONDS', '0'],
    ['AUTH_JWKS_MAX_KEYS', '0'],
    ['RATE_LIMIT_READS_PER_MINUTE', '0'],
    ['RATE_LIMIT_WRITES_PER_MINUTE', '1e3'],
    ['RATE_LIMIT_LEASE_POINTS', '0'],
    ['TRUSTED_PROXY_HOPS', '11'],
    ['CORS_ORIGINS', 'https://app.example/path'],
    ['CORS_ORIGINS', '*'],
    ['CACHE_MEMORY_MB', '1.5'],
    ['CACHE_MEMORY_MB', '4097'],
    ['CACHE_MAX_ENTRY_BYTES', '1023'],
    ['CACHE_CALLER_BYTES', '-1'],
    ['GATEWAY_MEMORY_LIMIT_MB', '1.5'],
    ['OVERLOAD_SHED_PERCENT', '101'],
    ['REDIS_KEY_PREFIX', 'team{a}:'],
    ['REDIS_KEY_PREFIX', 'with space:'],
  ])('refuses %s=%s', (name, value) => {
    expect(named(problemsOf(gatewaySchema, { [name]: value }))).toEqual([name]);
  });

  it('reads a public key as PEM or JWK', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    for (const text of [publicKey.export({ format: 'pem', type: 'spki' }).toString(), JSON.stringify(publicKey.export({ format: 'jwk' }))]) {
      const key = parseConfig(gatewaySchema, { AUTH_PUBLIC_KEY: text }).AUTH_PUBLIC_KEY;
      expect(key instanceof KeyObject && key.equals(publicKey)).toBe(true);
    }
  });

  it('with authentication on, needs exactly one source of keys', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = publicKey.export({ format: 'pem', type: 'spki' }).toString();
    const problems = (env: Record<string, string>) => authConfigProblems(parseConfig(gatewaySchema, env));
    expect(problems({})).toHaveLength(1);
    expect(problems({ AUTH_PUBLIC_KEY: pem, AUTH_JWKS_URL: 'https://id.example/jwks' })).toHaveLength(1);
    expect(problems({ AUTH_PUBLIC_KEY: pem })).toEqual([]);
    expect(problems({ AUTH_JWKS_URL: 'https://id.example/jwks' })).toEqual([]);
    expect(problems({ AUTH_ENABLED: 'false' })).toEqual([]);
    const issuer = 'https://id.example/realms/api';
    expect(problems({ AUTH_DISCOVERY: 'true', AUTH_ISSUER: issuer })).toEqual([]);
    expect(problems({ AUTH_DISCOVERY: 'true', AUTH_ISSUER: issuer, AUTH_JWKS_URL: 'https://id.example/jwks' })).toEqual([expect.stringMatching(/^AUTH_PUBLIC_KEY, AUTH_JWKS_URL, AUTH_DISCOVERY: set exactly one/)]);
    expect(problems({ AUTH_DISCOVERY: 'true', AUTH_ISSUER: issuer, AUTH_PUBLIC_KEY: pem })).toHaveLength(1);
    // Its discovery document is read from the issuer: it must be a URL.
    expect(problems({ AUTH_DISCOVERY: 'true' })).toEqual([expect.stringMatching(/^AUTH_ISSUER: must be an http or https URL/)]);
  });
});

describe('the development key', () => {
  const devJwk = JSON.stringify({ ...DEV_PUBLIC_KEY_JWK, kid: 'dev-1', alg: 'ES256', use: 'sig' });
  const problems = (env: Record<string, string>) => devKeyProblems(parseConfig(gatewaySchema, env));

  it('is refused on an address other machines reach, naming the variable, unless AUTH_ALLOW_DEV_KEY=true', () => {
    for (const HOST of ['0.0.0.0', '::', '10.0.0.5']) {
      expect(problems({ HOST, AUTH_PUBLIC_KEY: devJwk })).toEqual([expect.stringMatching(/^AUTH_PUBLIC_KEY: the development key .* AUTH_ALLOW_DEV_KEY=true$/)]);
      expect(problems({ HOST, AUTH_PUBLIC_KEY: JSON.stringify({ keys: [JSON.parse(devJwk)] }) })).toHaveLength(1);
      expect(problems({ HOST, AUTH_PUBLIC_KEY: devJwk, AUTH_ALLOW_DEV_KEY: 'true' })).toEqual([]);
    }
  });

  it('is taken on loopback, and any other key anywhere', () => {
    for (const HOST of ['127.0.0.1', '127.0.0.2', '::1']) expect(problems({ HOST, AUTH_PUBLIC_KEY: devJwk })).toEqual([]);
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    expect(problems({ HOST: '0.0.0.0', AUTH_PUBLIC_KEY: publicKey.export({ format: 'pem', type: 'spki' }).toString() })).toEqual([]);
    expect(problems({ HOST: '0.0.0.0', AUTH_ENABLED: 'false', AUTH_PUBLIC_KEY: devJwk })).toEqual([]);
  });

  it('tells loopback addresses from the others', () => {
    expect(['127.0.0.1', '127.255.0.9', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1'].filter((address) => !isLoopback(address))).toEqual([]);
    expect(['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', '::2', '::ffff:10.0.0.1'].filter(isLoopback)).toEqual([]);
  });
});

describe.each(services)('the $name configuration', ({ schema, port, metricsPort, databaseUrl }) => {
  it('names every bad variable at once', () => {
    const problems = problemsOf(schema, {
      PORT: 'abc',
      DATABASE_URL: 'postgres://db/app',
      MIGRATE_ON_START: 'yes',
      LOG_LEVEL: 'loud',
      SHUTDOWN_TIMEOUT_MS: '-5',
    });
    expect(named(problems)).toEqual(['DATABASE_URL', 'LOG_LEVEL', 'MIGRATE_ON_START', 'PORT', 'SHUTDOWN_TIMEOUT_MS']);
    expect(problems).toEqual(
      expect.arrayContaining([
        'MIGRATE_ON_START: must be true or false (got "yes")',
        'DATABASE_URL: must be a URL with scheme mysql (got "postgres://db/app")',
      ]),
    );
  });

  it('uses the defaults when variables are unset or empty', () => {
    const defaults = { PORT: port, HOST: '127.0.0.1', METRICS_PORT: metricsPort, METRICS_HOST: '127.0.0.1', DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: 10, DATABASE_QUEUE_LIMIT: 200, MIGRATE_ON_START: true, IDEMPOTENCY_TTL_SECONDS: 86_400, IDEMPOTENCY_SCOPE_BYTES: 1_048_576, WRITE_DEADLINE_MS: 5_000, LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT_MS: 15_000, LISTEN_SOCKETS: 64, REQUEST_HEAD_TIMEOUT_MS: 10_000, REQUEST_BODY_TIMEOUT_MS: 30_000, MAX_CONNECTIONS: 4096 };
    expect(parseConfig(schema, {})).toEqual(defaults);
    expect(parseConfig(schema, { PORT: '', HOST: '', METRICS_PORT: '', METRICS_HOST: '', DATABASE_URL: '', DATABASE_POOL_SIZE: '', DATABASE_QUEUE_LIMIT: '', MIGRATE_ON_START: '', IDEMPOTENCY_TTL_SECONDS: '', IDEMPOTENCY_SCOPE_BYTES: '', WRITE_DEADLINE_MS: '', LOG_LEVEL: '', SHUTDOWN_TIMEOUT_MS: '', LISTEN_SOCKETS: '', REQUEST_HEAD_TIMEOUT_MS: '', REQUEST_BODY_TIMEOUT_MS: '', MAX_CONNECTIONS: '' })).toEqual(defaults);
  });

  it.each([
    ['DATABASE_POOL_SIZE', '0'],
    ['DATABASE_QUEUE_LIMIT', '0'],
    ['HOST', 'localhost'],
    ['HOST', '0.0.0.0:8080'],
  ])('refuses %s=%s', (name, value) => {
    expect(named(problemsOf(schema, { [name]: value }))).toEqual([name]);
  });

  it('listens on the address HOST names: every interface of a container, or one of IPv6', () => {
    expect(parseConfig(schema, { HOST: '0.0.0.0' }).HOST).toBe('0.0.0.0');
    expect(parseConfig(schema, { HOST: '::' }).HOST).toBe('::');
  });

  it('reads MIGRATE_ON_START=false as false', () => {
    expect(parseConfig(schema, { MIGRATE_ON_START: 'false' }).MIGRATE_ON_START).toBe(false);
    expect(parseConfig(schema, { MIGRATE_ON_START: 'true' }).MIGRATE_ON_START).toBe(true);
  });

  it('refuses MIGRATE_ON_START=1 and names that variable alone', () => {
    const problems = problemsOf(schema, { MIGRATE_ON_START: '1' });
    expect(problems).toEqual(['MIGRATE_ON_START: must be true or false (got "1")']);
  });
});

describe.each([{ name: 'gateway', schema: gatewaySchema as z.ZodObject }, ...services])("the OpenTelemetry SDK's variables in the $name configuration", ({ schema }) => {
  it('accepts what the SDK reads: an OTLP endpoint in JSON or protobuf, a sampler and its ratio', () => {
    const tracing = {
      OTEL_SERVICE_NAME: 'edge',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
      OTEL_TRACES_EXPORTER: 'otlp,console',
      OTEL_SDK_DISABLED: 'false',
    };
    expect(parseConfig(schema, tracing)).toMatchObject(tracing);
    expect(parseConfig(schema, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_TRACES_SAMPLER_ARG: '1' })).toMatchObject({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' });
  });

  it('refuses what the SDK would silently replace with a default', () => {
    const problems = problemsOf(schema, {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'jaeger:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'json',
      OTEL_TRACES_SAMPLER: 'ratio',
      OTEL_TRACES_SAMPLER_ARG: '10%',
      OTEL_TRACES_EXPORTER: 'jaeger',
      OTEL_SDK_DISABLED: 'yes',
    });
    expect(named(problems)).toEqual(
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_SDK_DISABLED', 'OTEL_TRACES_EXPORTER', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG'].sort(),
    );
    expect(problems).toContain('OTEL_EXPORTER_OTLP_PROTOCOL: must be one of http/protobuf, http/json (got "json")');
  });
});
