/**
 * The OpenTelemetry SDK as every process runs it, configured by the SDK's own environment variables
 * (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_TRACES_SAMPLER, …). Imported only
 * by the preload, once it has registered the module hooks: nothing instrumented may load before.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { defaultTextMapGetter, ROOT_CONTEXT, trace, type TextMapPropagator } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { ExpressInstrumentation, ExpressLayerType } from '@opentelemetry/instrumentation-express';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { MySQL2Instrumentation } from '@opentelemetry/instrumentation-mysql2';
import { PinoInstrumentation } from '@opentelemetry/instrumentation-pino';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { onTelemetryFlush, serverSpanSettings } from './server-spans.js';

const traceContext = new W3CTraceContextPropagator();
const w3c = new CompositePropagator({ propagators: [traceContext, new W3CBaggagePropagator()] });

/**
 * W3C trace context and baggage, except that a process that does not continue its clients' traces
 * (the gateway, by default) takes neither from a request: its server span starts a new trace.
 */
const boundaryPropagator: TextMapPropagator = {
  inject: (context, carrier, setter) => w3c.inject(context, carrier, setter),
  extract: (context, carrier, getter) => (serverSpanSettings.continueClientTrace ? w3c.extract(context, carrier, getter) : context),
  fields: () => w3c.fields(),
};

/** Probes and scrapes: every few seconds from the platform, never what an operator opens a trace for. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

const isIncoming = (request: ClientRequest | IncomingMessage): request is IncomingMessage => !('getHeader' in request);

const http = new HttpInstrumentation({
  ignoreIncomingRequestHook: (request) => UNTRACED_PATHS.has(request.url ?? ''),
  // A client's trace context the process did not continue is linked from its own server span.
  requestHook: (span, request) => {
    if (serverSpanSettings.continueClientTrace || !isIncoming(request)) return;
    const client = trace.getSpanContext(traceContext.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter));
    if (client) span.addLink({ context: client });
  },
  // Last, once the response is done: the route the process knows overrides the one express guessed.
  applyCustomAttributesOnSpan: (span, request) => {
    if (!isIncoming(request)) return;
    const route = serverSpanSettings.routeOf?.(request);
    if (route === undefined) return;
    span.setAttribute('http.route', route);
    span.updateName(`${request.method ?? 'GET'} ${route}`);
  },
});

/** Starts the SDK: spans from the http, express, mysql2 and ioredis instrumentations, trace ids in pino's lines. */
export function startTracing(): void {
  const sdk = new NodeSDK({
    textMapPropagator: boundaryPropagator,
    instrumentations: [
      http,
      // A span per route handler (its route template); none per middleware or router.
      new ExpressInstrumentation({ ignoreLayersType: [ExpressLayerType.MIDDLEWARE, ExpressLayerType.ROUTER] }),
      new MySQL2Instrumentation(),
      // Only commands a request waits on (requireParentSpan, the default): not the memory tier's subscriber.
      new IORedisInstrumentation(),
      // trace_id and span_id in every log line written within a span; log records exported only if asked for.
      new PinoInstrumentation({ disableLogSending: (process.env.OTEL_LOGS_EXPORTER ?? 'none') === 'none' }),
    ],
  });
  sdk.start();
  onTelemetryFlush(() => sdk.shutdown());
}
