import { auth } from './auth/feature.js';
import { cache } from './cache/feature.js';
import { cors } from './cors/feature.js';
import { loadShedding } from './load-shedding/feature.js';
import { ownEndpoints } from './own-endpoints/feature.js';
import { proxy } from './proxy/feature.js';
import { rateLimits } from './rate-limits/feature.js';
import { routing } from './routing/feature.js';
import { tracing } from './tracing/feature.js';

/**
 * The gateway's features, in the order they are made: a feature may use what an earlier one made
 * (feature.ts: SharedParts), and within a phase of the chain their stages run in this order. Adding
 * a feature is adding it here (docs/adding-a-gateway-feature.md).
 */
export const FEATURES = [tracing, cors, loadShedding, auth, rateLimits, routing, proxy, cache, ownEndpoints] as const;
