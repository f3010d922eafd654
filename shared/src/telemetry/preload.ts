/**
 * Given to every process with `node --import @app/shared/telemetry/preload` (the workspaces' `npm
 * start`, the Dockerfiles' CMD): starts tracing before the process's own modules load, as
 * OpenTelemetry needs for ES modules. The module hooks are registered first, then the SDK starts
 * (its instrumentations tell the hooks which modules to patch), and only then does Node load the
 * entry point: express, mysql2, ioredis and pino are patched as they load.
 *
 * Tracing is off, and this costs nothing more than reading the environment, unless a trace exporter
 * is configured: an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
 * or OTEL_TRACES_EXPORTER naming one (`otlp`, `console`, `zipkin`); OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none turns it off whatever else is set.
 */
import { register } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { readFileSync } from 'node:fs';

const setting = (name: string) => process.env[name]?.trim() || undefined;

function tracingWanted(): boolean {
  if (setting('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return false;
  const exporters = setting('OTEL_TRACES_EXPORTER')?.split(',').map((name) => name.trim()).filter((name) => name !== '');
  if (exporters && exporters.length > 0) return exporters[0] !== 'none';
  return setting('OTEL_EXPORTER_OTLP_ENDPOINT') !== undefined || setting('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') !== undefined;
}

/** The name in the package.json of the entry point's workspace (`gateway`, `products-service`): the default service name. */
function workspaceName(): string | undefined {
  const entry = process.argv[1];
  if (entry === undefined) return undefined;
  for (let dir = dirname(entry); basename(dir) !== ''; dir = dirname(dir)) {
    try {
      return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string }).name;
    } catch {
      // No package.json here: look further up.
    }
  }
  return undefined;
}

if (tracingWanted()) {
  const name = setting('OTEL_SERVICE_NAME') ?? workspaceName();
  if (name !== undefined) process.env.OTEL_SERVICE_NAME = name;
  // Traces only, unless asked: the processes serve their metrics at /metrics and log to stdout.
  process.env.OTEL_METRICS_EXPORTER ??= 'none';
  process.env.OTEL_LOGS_EXPORTER ??= 'none';
  const { createAddHookMessageChannel } = await import('import-in-the-middle');
  const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, registerOptions);
  const { startTracing } = await import('./tracing.js');
  startTracing();
  await waitForAllMessagesAcknowledged();
}
