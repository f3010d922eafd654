import { defineFeature } from '../feature.js';
import { corsConfig } from './config.js';
import { corsStages } from './stages.js';

/** What every response may carry whatever the features: the services' own headers, and the request id. */
const ALWAYS_EXPOSED = ['ETag', 'Location', 'X-Request-Id', 'Idempotent-Replayed'];

/**
 * CORS for the origins CORS_ORIGINS names (none: no stages): their headers first, their preflights
 * answered once counted. The headers a page may read are every feature's `exposedHeaders`.
 */
export const cors = defineFeature({
  name: 'cors',
  config: corsConfig,
  exposedHeaders: ALWAYS_EXPOSED,
  create({ config, writer, exposedHeaders }) {
    const details = { corsOrigins: config.CORS_ORIGINS };
    if (config.CORS_ORIGINS.length === 0) return { name: 'cors', details };
    const { headers, preflight } = corsStages(config.CORS_ORIGINS, writer, exposedHeaders);
    return { name: 'cors', stages: { arrive: headers, admit: preflight }, details };
  },
});
