/**
 * `npm run openapi`: writes openapi.json, the API description clients use, from the compiled
 * workspaces (run `tsc -b` first; the npm script does). It is the document the gateway serves at
 * `GET /openapi.json`, built the same way: each service's own description, merged by the gateway
 * with the upstreams and deadlines of its default configuration and what its features describe.
 */
import { writeFileSync } from 'node:fs';
import { serializeDocument, type OpenApiDocument } from '@app/shared/api-description/openapi';
import { serviceDocument, type ServiceDefinition } from '@app/shared/service';
import { configSchema } from '../gateway/dist/config.js';
import { FEATURES } from '../gateway/dist/features.js';
import { upstreamSettings } from '../gateway/dist/routing/upstreams.js';
import { gatewayDocument } from '../gateway/dist/own-endpoints/api-description.js';
import { serviceModules } from '../tools/services.ts';

export const OPENAPI_FILE = new URL('../openapi.json', import.meta.url);

/** The document, as the gateway merges it from what each service serves (`documentOf` it). */
export async function apiDocument(documentOf: (service: ServiceDefinition) => OpenApiDocument = serviceDocument): Promise<OpenApiDocument> {
  const services = new Map((await serviceModules()).map(({ entry, service }) => [entry.name, service]));
  const config = configSchema.parse({});
  const parts = upstreamSettings(config).upstreams.map((upstream) => {
    const service = services.get(upstream.name);
    if (!service) throw new Error(`No service definition for the ${upstream.name} upstream`);
    // Through JSON, as the gateway receives it.
    return { upstream, document: JSON.parse(JSON.stringify(documentOf(service))) as OpenApiDocument };
  });
  const descriptions = FEATURES.flatMap((feature) => feature.description ?? []);
  return gatewayDocument(parts, { upstreamMs: config.UPSTREAM_TIMEOUT_MS, requestBodyMs: config.REQUEST_BODY_TIMEOUT_MS }, descriptions);
}

if (import.meta.main) {
  writeFileSync(OPENAPI_FILE, serializeDocument(await apiDocument()));
  console.log(`wrote ${OPENAPI_FILE.pathname}`);
}
