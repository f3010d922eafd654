import { header, problemResponse } from '@app/shared/api-description/openapi';
import { RATE_LIMIT_HEADER, RATE_LIMIT_POLICY_HEADER, RETRY_AFTER_HEADER } from '@app/shared/platform/http/headers';
import { z } from 'zod';
import type { FeatureDescription } from '../feature.js';
import { overBudget } from './problems.js';

/** The 429 of a read over its budget, as the stage answers it at `route`. */
export const overBudgetResponse = (route: string) => problemResponse(429, { problem: overBudget('read', 42), at: route }, { [RETRY_AFTER_HEADER]: 'RetryAfter' });

/** Every proxied operation counts against a budget: its 429, and the RateLimit headers on every response. */
export const rateLimitsDescription: FeatureDescription = {
  headers: {
    RateLimitPolicy: header(
      z.string().regex(/^"(read|write)";q=\d+;w=\d+$/).optional(),
      'The budget this request counts against (IETF RateLimit headers): `q` requests per `w` seconds, reads and writes apart. On every response under `/api` while rate limiting is on.',
      '"read";q=6000;w=60',
    ),
    RateLimit: header(z.string().regex(/^"(read|write)";r=\d+;t=\d+$/).optional(), 'What is left of that budget: `r` requests, for `t` more seconds.', '"read";r=5999;t=60'),
  },
  overview: () =>
    '**Rate limits**: each caller (its token\'s subject, or its address without a token) has a budget of reads and one of writes per minute; `RateLimit-Policy` and `RateLimit` say where it stands, and over it the answer is 429 with `Retry-After`.',
  operation: ({ route }) => ({
    responses: { 429: overBudgetResponse(route) },
    headers: { [RATE_LIMIT_POLICY_HEADER]: 'RateLimitPolicy', [RATE_LIMIT_HEADER]: 'RateLimit' },
  }),
};
