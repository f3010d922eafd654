import { readServiceList, type ServiceEntry } from '@app/shared/platform/services';
import type { ServedUpstream } from '../upstream-model.js';

/** The settings the upstreams are made from (config.ts validates them). */
type UpstreamConfig = Readonly<{ SERVICES_FILE: string; UPSTREAM_URL_TEMPLATE: string; GATEWAY_UPSTREAMS: readonly string[]; AUTH_PUBLIC_READS: readonly string[] }>;

/**
 * The upstreams: one per service in SERVICES_FILE, at UPSTREAM_URL_TEMPLATE unless GATEWAY_UPSTREAMS
 * says otherwise; or the problems that stop the gateway from starting.
 */
export function upstreamSettings(config: UpstreamConfig): { upstreams: ServedUpstream[]; problems: string[] } {
  let services: ServiceEntry[];
  try {
    services = readServiceList(config.SERVICES_FILE);
  } catch (error) {
    return { upstreams: [], problems: [`SERVICES_FILE: ${(error as Error).message}`] };
  }
  const byName = new Map(services.map((service) => [service.name, service]));
  const urls = new Map(config.GATEWAY_UPSTREAMS.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]));
  const problems = [
    ...[...urls.keys()].filter((name) => !byName.has(name)).map((name) => `GATEWAY_UPSTREAMS: ${name}: no such service in ${config.SERVICES_FILE}`),
    ...config.AUTH_PUBLIC_READS.filter((name) => !byName.get(name)?.publicReads).map(
      (name) => `AUTH_PUBLIC_READS: ${name}: ${byName.has(name) ? 'its reads may not be public (services.json)' : `no such service in ${config.SERVICES_FILE}`}`,
    ),
  ];
  const upstreams = services.map((service) => ({
    name: service.name,
    prefix: service.prefix,
    url: urls.get(service.name) ?? config.UPSTREAM_URL_TEMPLATE.replaceAll('{service}', service.workspace).replaceAll('{port}', String(service.port)),
    cachedReads: service.cachedReads,
    publicReads: config.AUTH_PUBLIC_READS.includes(service.name),
    owner: service.owner,
    cache: service.cache,
    body: service.body,
  }));
  return { upstreams, problems };
}
