/**
 * The OpenTelemetry SDK as every process runs it, configured by the SDK's own environment variables
 * (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_TRACES_SAMPLER, …). Imported only
 * by the preload, once it has registered the module hooks: nothing instrumented may load before.
 */
import { ExpressInstrumentation, ExpressLayerType } from '@opentelemetry/instrumentation-express';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { MySQL2Instrumentation } from '@opentelemetry/instrumentation-mysql2';
import { PinoInstrumentation } from '@opentelemetry/instrumentation-pino';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { tracingStarted } from './spans.js';

/**
 * Starts the SDK: spans from the express, mysql2 and ioredis instrumentations, trace ids in pino's
 * lines. The HTTP spans, served and sent, are made by spans.ts, not by
 * @opentelemetry/instrumentation-http, which works on every request, sampled or not (spans.ts).
 */
export function startTracing(): void {
  const sdk = new NodeSDK({
    instrumentations: [
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
  tracingStarted(() => sdk.shutdown());
}
