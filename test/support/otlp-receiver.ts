import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** OTLP's span kinds and status codes (opentelemetry-proto trace.proto). */
export const SPAN_KIND = { server: 2, client: 3 } as const;
export const STATUS_ERROR = 2;

/** A span as the receiver got it, with the service that sent it and its attributes as plain values. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code?: number; message?: string };
  links: { traceId: string; spanId: string }[];
}

interface KeyValue {
  key: string;
  value: Record<string, unknown>;
}

/** An OTLP AnyValue as a plain value: `{ stringValue: 'x' }` → `'x'`, `{ intValue: '200' }` → 200. */
function plain(value: Record<string, unknown>): unknown {
  if ('intValue' in value) return Number(value.intValue);
  const [only] = Object.values(value);
  return only;
}

const attributesOf = (list: KeyValue[] | undefined) => Object.fromEntries((list ?? []).map(({ key, value }) => [key, plain(value)]));

interface ExportRequest {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: { spans?: (Omit<ReceivedSpan, 'service' | 'attributes'> & { attributes?: KeyValue[] })[] }[];
  }[];
}

/**
 * An OTLP/HTTP receiver for traces in JSON (OTEL_EXPORTER_OTLP_PROTOCOL=http/json): what a collector
 * would get from the processes, decoded. `waitFor` resolves once the spans received satisfy a
 * condition, checked as each export arrives, and fails after `timeoutMs`.
 */
export async function startOtlpReceiver() {
  const spans: ReceivedSpan[] = [];
  /** Exports in protobuf (http/protobuf): their sizes, not decoded. */
  const protobufExports: { bytes: number }[] = [];
  const arrivals = new Set<() => void>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const type = String(req.headers['content-type']);
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !(type.startsWith('application/json') || type === 'application/x-protobuf')) {
        res.writeHead(415).end();
        return;
      }
      if (type === 'application/x-protobuf') {
        protobufExports.push({ bytes: Buffer.concat(chunks).length });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      } else {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as ExportRequest;
        for (const { resource, scopeSpans } of body.resourceSpans ?? []) {
          const service = String(attributesOf(resource?.attributes)['service.name']);
          for (const scope of scopeSpans ?? []) {
            for (const span of scope.spans ?? []) spans.push({ ...span, service, attributes: attributesOf(span.attributes), links: span.links ?? [] });
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      }
      for (const arrived of arrivals) arrived();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    protobufExports,
    /** The value `found` returns once it returns one (checked now and after every export), or a failure after `timeoutMs`. */
    waitFor<T>(found: (spans: ReceivedSpan[]) => T | undefined, timeoutMs = 10_000): Promise<T> {
      const now = found(spans);
      if (now !== undefined) return Promise.resolve(now);
      return new Promise((resolve, reject) => {
        const check = () => {
          const result = found(spans);
          if (result === undefined) return;
          arrivals.delete(check);
          clearTimeout(deadline);
          resolve(result);
        };
        const deadline = setTimeout(() => {
          arrivals.delete(check);
          reject(new Error(`not among the ${spans.length} spans received within ${timeoutMs} ms: ${JSON.stringify(spans.map(({ service, name, kind, traceId, spanId, parentSpanId }) => ({ service, name, kind, traceId, spanId, parentSpanId })))}`));
        }, timeoutMs);
        arrivals.add(check);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
