import { z } from 'zod';
import { type ConnectionBudget, DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_BODY_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS } from './http/connection-budget.js';
import { DEFAULT_LISTEN_SOCKETS } from './http/listening-sockets.js';
import { DEFAULT_REQUEST_HEAD_TIMEOUT_MS } from './http/request-head-deadline.js';

/**
 * Reads configuration from the environment once, at start-up. Every variable is validated; a bad
 * or missing one stops the process with one message naming every bad variable.
 */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

export function parseConfig<S extends z.ZodObject>(schema: S, env: NodeJS.ProcessEnv): z.infer<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const name = issue.path.join('.');
    const value = env[name];
    const shown = value === undefined ? 'missing' : `got ${JSON.stringify(value)}`;
    return `${name}: ${issue.message} (${shown})`;
  });
  throw new ConfigError(problems);
}

/** parseConfig for a process entry point: prints the problems and exits 1 instead of throwing. */
export function loadConfig<S extends z.ZodObject>(schema: S, env: NodeJS.ProcessEnv = process.env): z.infer<S> {
  try {
    return parseConfig(schema, env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
}

// Building blocks. Empty strings count as unset, so `PORT=` falls back to the default.
export const unsetIfEmpty = (value: unknown) => (value === '' ? undefined : value);

/** Whether `value` parses as a URL with one of `protocols` (`'http:'`, …). */
export const hasScheme = (value: string, protocols: readonly string[]) => URL.canParse(value) && protocols.includes(new URL(value).protocol);
export const HTTP_SCHEMES = ['http:', 'https:'] as const;
const schemeMessage = (protocols: readonly string[]) => `must be a URL with scheme ${protocols.map((p) => p.replace(':', '')).join(' or ')}`;

/** A whole number written in decimal digits (no `1e3`, `0x50` or spaces), from `min` to `max`. */
const wholeNumber = (fallback: number, min: number, max: number, message: string) =>
  z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .default(String(fallback))
      .refine((value) => /^\d{1,15}$/.test(value) && Number(value) >= min && Number(value) <= max, { message })
      .transform(Number),
  );

/** The address a server listens on: an IP address, `0.0.0.0` or `::` for every interface. */
export const listenAddress = (fallback: string) =>
  z.preprocess(unsetIfEmpty, z.union([z.ipv4(), z.ipv6()], { error: 'must be an IP address (0.0.0.0 or :: for every interface)' }).default(fallback));

export const port = (fallback: number) => wholeNumber(fallback, 0, 65535, 'must be a port number from 0 to 65535');

export const milliseconds = (fallback: number) =>
  wholeNumber(fallback, 1, 2 ** 31 - 1, 'must be a whole, positive number of milliseconds');

export const seconds = (fallback: number, min: number) =>
  wholeNumber(fallback, min, 86_400 * 365, `must be a whole number of seconds, at least ${min}`);

/** A whole number of things (connections, requests, percent) from `min` to `max`. */
export const count = (fallback: number, min: number, max: number) => wholeNumber(fallback, min, max, `must be a whole number from ${min} to ${max}`);

export const megabytes = (fallback: number, max: number) =>
  wholeNumber(fallback, 0, max, `must be a whole number of megabytes from 0 to ${max}`);

export const url = (protocols: string[], fallback: string) =>
  z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .default(fallback)
      .refine((value) => hasScheme(value, protocols), { message: schemeMessage(protocols) }),
  );

/** A URL with one of `protocols`, or nothing. */
export const optionalUrl = (protocols: readonly string[]) =>
  z.preprocess(unsetIfEmpty, z.string().refine((value) => hasScheme(value, protocols), { message: schemeMessage(protocols) }).optional());

/** A comma-separated list, each item checked by `item`. */
export const list = (fallback: string, item: z.ZodType<string>, message: string) =>
  z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .default(fallback)
      .transform((value) => value.split(',').map((part) => part.trim()).filter((part) => part !== ''))
      .refine((items) => items.every((value) => item.safeParse(value).success), { message }),
  );

export const flag = (fallback: boolean) =>
  z.preprocess(
    unsetIfEmpty,
    z.enum(['true', 'false'], { error: 'must be true or false' }).default(fallback ? 'true' : 'false').transform((v) => v === 'true'),
  );

export const logLevel = z.preprocess(
  unsetIfEmpty,
  z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
    error: 'must be one of fatal, error, warn, info, debug, trace, silent',
  }).default('info'),
);

/** An optional variable: one of `values`, or unset. */
const oneOf = (values: readonly [string, ...string[]]) =>
  z.preprocess(unsetIfEmpty, z.enum(values, { error: `must be one of ${values.join(', ')}` }).optional());

/**
 * The OpenTelemetry SDK's own variables that deployments set (docs/tracing.md). The SDK reads them
 * itself, in the preload (shared/src/telemetry/preload.ts), before this runs; they are validated here
 * so that a mistyped one stops the process like any other, not silently falls back to a default.
 */
export const tracingConfig = {
  OTEL_SDK_DISABLED: oneOf(['true', 'false']),
  OTEL_SERVICE_NAME: z.preprocess(unsetIfEmpty, z.string().optional()),
  OTEL_TRACES_EXPORTER: z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .regex(/^(otlp|console|zipkin|none)(,(otlp|console|zipkin|none))*$/, 'must be a comma-separated list of otlp, console, zipkin, none')
      .optional(),
  ),
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalUrl(HTTP_SCHEMES),
  OTEL_EXPORTER_OTLP_PROTOCOL: oneOf(['http/protobuf', 'http/json']),
  OTEL_TRACES_SAMPLER: oneOf(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']),
  OTEL_TRACES_SAMPLER_ARG: z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .refine((value) => /^(0|1|0?\.\d+|1\.0*)$/.test(value), { message: 'must be a sampling ratio from 0 to 1' })
      .optional(),
  ),
};

/** Variables every process reads. */
export const commonConfig = {
  LOG_LEVEL: logLevel,
  LISTEN_SOCKETS: count(DEFAULT_LISTEN_SOCKETS, 1, 1_024),
  SHUTDOWN_TIMEOUT_MS: milliseconds(15_000),
  REQUEST_HEAD_TIMEOUT_MS: milliseconds(DEFAULT_REQUEST_HEAD_TIMEOUT_MS),
  REQUEST_BODY_TIMEOUT_MS: milliseconds(DEFAULT_REQUEST_BODY_TIMEOUT_MS),
  MAX_CONNECTIONS: count(DEFAULT_MAX_CONNECTIONS, 1, 1_000_000),
  ...tracingConfig,
};

/** The budget of each connection (see ConnectionBudget) the common variables give, with a per-address cap (0: none). */
export const connectionBudgetOf = (
  config: { REQUEST_HEAD_TIMEOUT_MS: number; REQUEST_BODY_TIMEOUT_MS: number; MAX_CONNECTIONS: number },
  perAddress: number,
): ConnectionBudget => ({ headMs: config.REQUEST_HEAD_TIMEOUT_MS, bodyMs: config.REQUEST_BODY_TIMEOUT_MS, idleMs: KEEP_ALIVE_TIMEOUT_MS, total: config.MAX_CONNECTIONS, perAddress });
