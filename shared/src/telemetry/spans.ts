import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { type Context, context, propagation, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, trace, TraceFlags, type Tracer } from '@opentelemetry/api';
import { getRPCMetadata, RPCType, setRPCMetadata, W3CTraceContextPropagator } from '@opentelemetry/core';
import { ChainedContext } from './request-context.js';

/**
 * The spans of HTTP requests, served (`traceRequests`) and sent (`startClientSpan`), made here
 * rather than by @opentelemetry/instrumentation-http, which does per-request work whether the
 * request is sampled or not (attributes, URL parsing, listeners, metrics; figures in
 * docs/benchmarks/tracing.md). Here an unsampled request costs a sampling decision, a context
 * (where `unsampledInContext`) and the `traceparent` it passes on; a sampled one, spans with the
 * route, the status and whatever the process adds (`currentServerSpan`). Only the OpenTelemetry
 * API: with tracing off, `traceRequests` returns the handler as it is and every other call finds
 * no span.
 */
export interface ServerSpanSettings {
  /**
   * Whether a request's `traceparent` is continued (a service, called by the gateway) or only linked
   * from a new trace (the gateway: a trust boundary, whose clients may send anything).
   */
  continueClientTrace: boolean;
  /** The route template of a request (`/api/products/{id}`, never the raw id), when the process knows it better than express. */
  routeOf?: (req: IncomingMessage) => string | undefined;
  /**
   * Whether a request that is not sampled is handled within its trace context, as a sampled one is.
   * A service's must be: the mysql2 instrumentation starts a trace of its own for a statement made
   * outside any. The gateway's need not: its Redis spans need a parent, and its calls to services
   * are given the request's context (`traceOf`). Entering a context costs every asynchronous step
   * of the request, so the gateway spares it the requests it does not sample.
   */
  unsampledInContext: boolean;
}

const serverSpanSettings: ServerSpanSettings = { continueClientTrace: true, unsampledInContext: true };

/** Sets how the server spans of this process are made: before it listens. */
export function configureServerSpans(settings: Partial<ServerSpanSettings>): void {
  Object.assign(serverSpanSettings, settings);
}

/**
 * The server span of the request being handled, wherever its handling has got to (inside an express
 * layer's span, or after an await). Undefined with tracing off, outside a request, or when the
 * request is not sampled (nothing to record).
 */
export function currentServerSpan(): Span | undefined {
  // With tracing off no request has a span: no context to look it up in.
  if (tracer === undefined) return undefined;
  return getRPCMetadata(context.active())?.span;
}

/** Calls `log` on `self` within `span`'s context, so that the pino instrumentation puts its ids on the line. */
export function logWithin<T, A extends unknown[]>(span: Span | undefined, log: (this: T, ...args: A) => void, self: T, ...args: A): void {
  if (span) context.with(trace.setSpan(ROOT_CONTEXT, span), log, self, ...args);
  else log.apply(self, args);
}

const REQUEST_TRACE = Symbol('request trace');
/** Set on every request traced, sampled or not: a request of one shape whichever it is. */
type TracedRequest = IncomingMessage & { [REQUEST_TRACE]?: Context };
/** What `traceOf` gives: a request's trace context, for the calls made on its behalf. */
export type RequestTrace = Context;

/**
 * The trace context of a request being served, sampled or not (its server span, the sampling
 * decision its calls pass on): what a call made on its behalf starts from, wherever it is made.
 * Undefined with tracing off, and for the requests never traced (probes, scrapes).
 */
export function traceOf(req: IncomingMessage): RequestTrace | undefined {
  return (req as TracedRequest)[REQUEST_TRACE];
}

/** Probes and scrapes: every few seconds from the platform, never what an operator opens a trace for. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

const clientContext = new W3CTraceContextPropagator();
const headerGetter = {
  get: (headers: IncomingMessage['headers'], key: string) => headers[key],
  keys: (headers: IncomingMessage['headers']) => Object.keys(headers),
};

/**
 * Once the response is done (or the client went away): status, route and name, then the end.
 * `traced` is the RPC metadata of @opentelemetry/core, whose `route` express's instrumentation sets.
 */
function endServerSpan(res: ServerResponse, traced: { span: Span; route?: string }): void {
  const { span } = traced;
  const req = res.req;
  const route = serverSpanSettings.routeOf?.(req) ?? traced.route;
  span.setAttribute('http.response.status_code', res.statusCode);
  if (route !== undefined) {
    span.setAttribute('http.route', route);
    span.updateName(`${req.method ?? 'GET'} ${route}`);
  }
  if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  if (!res.writableFinished) span.setAttribute('http.response.aborted', true);
  span.end();
}

/** The SDK's tracer, once it runs: undefined with tracing off. */
let tracer: Tracer | undefined;
let flush: (() => Promise<void>) | undefined;

/** Called by the preload once the SDK runs: requests get server spans, and how to send the spans still held before the process exits. */
export function tracingStarted(flushSpans: () => Promise<void>): void {
  tracer = trace.getTracer('@app/shared/telemetry');
  flush = flushSpans;
}

// The options of every span made here, made once: the SDK only reads them.
const SERVER_SPAN = { kind: SpanKind.SERVER };
const CLIENT_SPAN = { kind: SpanKind.CLIENT };

const pathOf = (url: string) => {
  const queryStart = url.indexOf('?');
  return queryStart < 0 ? url : url.slice(0, queryStart);
};

/** `handler` with a server span around each request, when tracing is on; `handler` itself otherwise. */
export function traceRequests(handler: RequestListener): RequestListener {
  if (!tracer) return handler;
  const serverTracer = tracer;
  return (req, res) => {
    const path = pathOf(req.url ?? '/');
    if (UNTRACED_PATHS.has(path)) {
      handler(req, res);
      return;
    }
    const method = req.method ?? 'GET';
    const parent = serverSpanSettings.continueClientTrace ? propagation.extract(ROOT_CONTEXT, req.headers) : ROOT_CONTEXT;
    const span = serverTracer.startSpan(method, SERVER_SPAN, parent);
    const spanContext = trace.setSpan(new ChainedContext(parent), span);
    if (!span.isRecording()) {
      // Not sampled: only the decision, which the client spans (so the services) and the MySQL spans follow.
      (req as TracedRequest)[REQUEST_TRACE] = spanContext;
      if (serverSpanSettings.unsampledInContext) context.with(spanContext, handler, undefined, req, res);
      else handler(req, res);
      return;
    }
    span.setAttributes({ 'http.request.method': method, 'url.path': path });
    // A client's trace context the process did not continue is linked from its own trace.
    if (!serverSpanSettings.continueClientTrace && req.headers.traceparent !== undefined) {
      const client = trace.getSpanContext(clientContext.extract(ROOT_CONTEXT, req.headers, headerGetter));
      if (client) span.addLink({ context: client });
    }
    const metadata = { type: RPCType.HTTP as const, span, route: undefined as string | undefined };
    // A closure, not a property on the response: a sampled response of another shape than the rest
    // would make Node's code for every response slower (polymorphic).
    res.once('close', () => endServerSpan(res, metadata));
    const requestContext = setRPCMetadata(spanContext, metadata);
    (req as TracedRequest)[REQUEST_TRACE] = requestContext;
    context.with(requestContext, handler, undefined, req, res);
  };
}

/**
 * A client span for a request to `path` on `service`, made on behalf of a request being served (its
 * context, `traceOf`): a child of its span, whose context goes into `headers` (`traceparent`; when
 * not sampled, the request's own: the service follows the decision). Undefined when not sampled,
 * and `headers` untouched with tracing off or without a request; end it with `endClientSpan`.
 */
export function startClientSpan(parent: RequestTrace | undefined, method: string, service: URL, path: string, headers: Record<string, unknown>): Span | undefined {
  if (!tracer || parent === undefined) return undefined;
  const request = trace.getSpan(parent);
  if (request === undefined) return undefined;
  if ((request.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) {
    // A trace not sampled records no span of this call either (the sampler follows the parent, or
    // decides again by the same trace id): the service only hears the decision, in the request's context.
    propagation.inject(parent, headers);
    return undefined;
  }
  const span = tracer.startSpan(method, CLIENT_SPAN, parent);
  propagation.inject(trace.setSpan(parent, span), headers);
  if (!span.isRecording()) return undefined;
  span.setAttributes({ 'http.request.method': method, 'server.address': service.hostname, 'server.port': Number(service.port || 80), 'url.full': `${service.origin}${path}` });
  return span;
}

/** Ends a client span with the service's status (an error at 5xx), or with the failure that left it without one. */
export function endClientSpan(span: Span | undefined, outcome: number | Error): void {
  if (!span) return;
  if (typeof outcome === 'number') {
    span.setAttribute('http.response.status_code', outcome);
    if (outcome >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  } else {
    span.setAttribute('error.type', outcome.name);
    span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.message });
  }
  span.end();
}

/**
 * Sends the spans still held (a no-op with tracing off): the last step of a graceful shutdown, given
 * `withinMs` at most so that an unreachable collector does not hold the exit past the platform's grace period.
 */
export async function flushTelemetry(withinMs = 2_000): Promise<void> {
  if (!flush) return;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs)));
  await Promise.race([flush().catch(() => undefined), late]);
  clearTimeout(timer);
}
