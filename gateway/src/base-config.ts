import { commonConfig, count, hasScheme, HTTP_SCHEMES, list, listenAddress, port, unsetIfEmpty } from '@app/shared/platform/config';
import { SERVICES_FILE } from '@app/shared/platform/services';
import { z } from 'zod';
import { redisConfig } from './redis/config.js';

const isHttpUrl = (value: string) => hasScheme(value, HTTP_SCHEMES);

/**
 * The settings of the gateway as a whole, which any feature may read: where it listens, which
 * services it routes to, its Redis, the proxies trusted in front of it, and what every process reads.
 * Each feature adds its own (config.ts puts them together).
 */
export const baseConfig = {
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
  ...redisConfig,
  TRUSTED_PROXY_HOPS: count(0, 0, 10),
  ...commonConfig,
};

/** The base settings, as validated. */
export type BaseConfig = z.infer<z.ZodObject<typeof baseConfig>>;
