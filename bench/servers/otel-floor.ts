/**
 * The OpenTelemetry SDK alone: the ceiling's fixed answer, and with SDK=1 the SDK started as the
 * processes start it (NodeSDK, configured by the standard OTEL_* variables, here an OTLP exporter
 * and a sampler), with one server span per request as the gateway makes it (a root span; when
 * sampled, its context active while the request is handled, four attributes, ended when the
 * response closes) and nothing else: no instrumentations, no cache, no protections. What the SDK
 * costs a request by itself is this with SDK=1 against this without. Started by `npm run bench --
 * --tracing`; reads PORT, SDK and the OTEL_* variables.
 */
import type { RequestListener } from 'node:http';
import { serveBare } from './serve.ts';

const body = Buffer.from(JSON.stringify({ id: '01a21569-ff64-74f5-8dba-354f3bab1d50', sku: 'FLOOR-1', name: 'Floor', price: { amount: '19.99', currency: 'EUR' }, stock: 42 }));
const answer: RequestListener = (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
  res.end(body);
};

async function traced(handler: RequestListener): Promise<RequestListener> {
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const { context, ROOT_CONTEXT, SpanKind, trace } = await import('@opentelemetry/api');
  new NodeSDK({ instrumentations: [] }).start();
  const tracer = trace.getTracer('otel-floor');
  const options = { kind: SpanKind.SERVER };
  return (req, res) => {
    const span = tracer.startSpan(req.method ?? 'GET', options, ROOT_CONTEXT);
    if (!span.isRecording()) {
      handler(req, res);
      return;
    }
    span.setAttributes({ 'http.request.method': req.method ?? 'GET', 'url.path': req.url ?? '/' });
    res.once('close', () => {
      span.setAttributes({ 'http.response.status_code': res.statusCode, 'http.route': '/api/products/{id}' });
      span.end();
    });
    context.with(trace.setSpan(ROOT_CONTEXT, span), handler, undefined, req, res);
  };
}

serveBare(process.env.SDK === '1' ? await traced(answer) : answer);
