/**
 * The gateway's features, in the order they are made: a feature may use what an earlier one made
 * (feature.ts: SharedParts), and within a phase of the chain their stages run in this order. Adding
 * a feature is adding its line here (docs/adding-a-gateway-feature.md): each line loads the
 * feature's folder, so that nothing else in this file names it.
 */
export const FEATURES = [
  (await import('./tracing/feature.js')).tracing,
  (await import('./cors/feature.js')).cors,
  (await import('./load-shedding/feature.js')).loadShedding,
  (await import('./auth/feature.js')).auth,
  (await import('./rate-limits/feature.js')).rateLimits,
  (await import('./routing/feature.js')).routing,
  (await import('./proxy/feature.js')).proxy,
  (await import('./cache/feature.js')).cache,
  (await import('./own-endpoints/feature.js')).ownEndpoints,
] as const;
