import { configureServerSpans } from '@app/shared/telemetry/spans';
import { exchangeOf } from '../exchange.js';
import { defineFeature } from '../feature.js';
import { traceContextConfig } from './config.js';

/** The gateway's server spans: named by route, and linked to (not continuing) a client's trace unless TRACE_TRUST_CLIENT_CONTEXT. */
export const tracing = defineFeature({
  name: 'tracing',
  config: traceContextConfig,
  create({ config, routing }) {
    // The gateway is where clients come in: their trace context is linked, not continued, unless
    // trusted. A request it does not sample needs no context: its hops are given the request's.
    configureServerSpans({
      continueClientTrace: config.TRACE_TRUST_CLIENT_CONTEXT,
      unsampledInContext: false,
      routeOf: (req) => routing.label(exchangeOf(req)?.target),
    });
    return { name: 'tracing' };
  },
});
