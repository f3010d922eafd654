import { flag } from '@app/shared/platform/config';

/** The settings of the gateway's own tracing: whose trace context it continues, and so whose trace its spans join. */
export const traceContextConfig = {
  /**
   * Whether the gateway continues a client's W3C trace context (a trusted proxy in front, which traces
   * too). By default it is not trusted: each request starts a new trace, linked to the client's.
   */
  TRACE_TRUST_CLIENT_CONTEXT: flag(false),
};
