import type { IncomingMessage } from 'node:http';
import { context, type Span } from '@opentelemetry/api';
import { getRPCMetadata } from '@opentelemetry/core';

/**
 * What a process tells the tracing set up by the preload (preload.ts) about its requests. Only the
 * OpenTelemetry API here: with tracing off, every call below finds no span and does nothing.
 */
export interface ServerSpanSettings {
  /**
   * Whether a request's `traceparent` is continued (a service, called by the gateway) or only linked
   * from a new trace (the gateway: a trust boundary, whose clients may send anything).
   */
  continueClientTrace: boolean;
  /** The route template of a request (`/api/products/{id}`, never the raw id), when the process knows it better than express. */
  routeOf?: (req: IncomingMessage) => string | undefined;
}

export const serverSpanSettings: ServerSpanSettings = { continueClientTrace: true };

/** Sets how the server spans of this process are made: before it listens. */
export function configureServerSpans(settings: Partial<ServerSpanSettings>): void {
  Object.assign(serverSpanSettings, settings);
}

/**
 * The server span of the request being handled, wherever its handling has got to (inside an express
 * layer's span, or after an await): the http instrumentation keeps it in the request's context.
 * Undefined with tracing off, or outside a request.
 */
export function currentServerSpan(): Span | undefined {
  return getRPCMetadata(context.active())?.span;
}

let flush: (() => Promise<void>) | undefined;

/** Called by the preload once the SDK runs: how to send the spans still held before the process exits. */
export function onTelemetryFlush(flushSpans: () => Promise<void>): void {
  flush = flushSpans;
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
