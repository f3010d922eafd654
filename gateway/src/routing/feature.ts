import { defineFeature } from '../feature.js';
import { canonicalOnly } from './canonical-stage.js';
import { notFound } from './not-found-stage.js';

/** What routing answers itself: a target with no canonical form (404) early, and an API path no service serves (404) last. */
export const routing = defineFeature({
  name: 'routing',
  config: {},
  create({ writer }) {
    return { name: 'routing', stages: { route: canonicalOnly(writer), last: notFound(writer) } };
  },
});
