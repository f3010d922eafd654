import { problemResponse } from '@app/shared/api-description/openapi';
import type { ZodOpenApiResponseObject } from 'zod-openapi';
import type { FeatureDescription } from '../feature.js';
import { requestBodyTimedOut, upstreamTimedOut, upstreamUnreachable } from './problems.js';

/** What the way to the service can answer instead of it: a body that came too slowly (408), the service unreachable (502) or too slow (504). */
export const proxyDescription: FeatureDescription = {
  operation: ({ upstream, route, operation, deadlines }) => {
    const responses: Record<number, ZodOpenApiResponseObject> = {
      502: problemResponse(502, { problem: upstreamUnreachable(upstream.name), at: route }),
      504: problemResponse(504, { problem: upstreamTimedOut(upstream.name, 'headers', deadlines.upstreamMs), at: route }),
    };
    if (operation.requestBody) responses[408] = problemResponse(408, { problem: requestBodyTimedOut(deadlines.requestBodyMs), at: route });
    return { responses };
  },
};
