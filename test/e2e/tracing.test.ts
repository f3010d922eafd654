/**
 * Traces as an operator opens them: the gateway and products-service run as `npm start` runs them,
 * exporting over OTLP/HTTP in JSON to a receiver in the test, as they would to a collector.
 */
import { defaultToken, TEST_RULES, testPublicKeyPem } from '../support/auth.js';
import { client, expectProblem } from '../support/http.js';
import { type ReceivedSpan, SPAN_KIND, startOtlpReceiver, STATUS_ERROR } from '../support/otlp-receiver.js';
import { run, type RunningProcess } from '../../tools/process.js';
import { dropSchema, throwawayDatabaseUrl } from '../support/stack.js';
import { closedPort, silentServer } from '../../tools/tcp-proxy.js';

let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
let products: RunningProcess;
/** The gateway as deployed by default. */
let gateway: RunningProcess;
/** One behind a trusted, tracing proxy: it continues its clients' traces and records their subject. */
let trusting: RunningProcess;
/** One exporting in protobuf (http/protobuf). */
let protobuf: RunningProcess;
/** One that samples no request (OTEL_TRACES_SAMPLER=always_off). */
let unsampled: RunningProcess;
let api: ReturnType<typeof client>;
let trustingApi: ReturnType<typeof client>;
let timingOut: RunningProcess;
let timingOutApi: ReturnType<typeof client>;
let hungUsers: Awaited<ReturnType<typeof silentServer>>;
const databaseUrl = throwawayDatabaseUrl('tracing');

const listening = (line: Record<string, unknown>) => String(line.msg).endsWith('listening');
const npmStart = (workspace: string, env: Record<string, string>) =>
  run('npm', ['start', '--silent', '-w', workspace], {
    PORT: '0',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    // Spans go out every 20 ms, so the test waits for them only as long as the processes take.
    OTEL_BSP_SCHEDULE_DELAY: '20',
    ...env,
  });
const gatewayUrl = async (started: RunningProcess) => `http://127.0.0.1:${(await started.logged(listening)).port as number}`;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  products = npmStart('products-service', { DATABASE_URL: databaseUrl });
  const productsPort = (await products.logged(listening)).port as number;
  const startGateway = (env: Record<string, string> = {}) =>
    npmStart('gateway', {
      // Nothing listens for users: every request for /api/users fails with a 502.
      GATEWAY_UPSTREAMS: `products=http://127.0.0.1:${productsPort},users=http://127.0.0.1:${unreachable}`,
      REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
      LISTEN_SOCKETS: '1',
      AUTH_PUBLIC_KEY: testPublicKeyPem,
      AUTH_ISSUER: TEST_RULES.issuer,
      AUTH_AUDIENCE: TEST_RULES.audience,
      ...env,
    });
  const unreachable = await closedPort();
  gateway = startGateway();
  trusting = startGateway({ OTEL_SERVICE_NAME: 'gateway-behind-proxy', TRACE_TRUST_CLIENT_CONTEXT: 'true', TRACE_RECORD_SUBJECT: 'true' });
  protobuf = startGateway({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' });
  unsampled = startGateway({ OTEL_SERVICE_NAME: 'gateway-unsampled', OTEL_TRACES_SAMPLER: 'always_off' });
  // Users there accept the connection and never answer: every request for /api/users is a 504.
  hungUsers = await silentServer();
  timingOut = startGateway({
    OTEL_SERVICE_NAME: 'gateway-timing-out',
    GATEWAY_UPSTREAMS: `products=http://127.0.0.1:${productsPort},users=${hungUsers.url}`,
    UPSTREAM_TIMEOUT_MS: '300',
  });
  const [url, trustingUrl, , , timingOutUrl] = await Promise.all([gatewayUrl(gateway), gatewayUrl(trusting), gatewayUrl(protobuf), gatewayUrl(unsampled), gatewayUrl(timingOut)]);
  api = client(url);
  trustingApi = client(trustingUrl);
  timingOutApi = client(timingOutUrl);
}, 60_000);

afterAll(async () => {
  const all = [gateway, trusting, protobuf, unsampled, timingOut, products];
  for (const started of all) started?.child.kill('SIGTERM');
  await Promise.all(all.map((started) => started?.exited));
  await hungUsers?.close();
  await receiver?.close();
  await dropSchema(databaseUrl);
});

const inTrace = (spans: ReceivedSpan[], traceId: string) => spans.filter((span) => span.traceId === traceId);
const isMysql = (span: ReceivedSpan) => span.attributes['db.system.name'] === 'mysql' || span.attributes['db.system'] === 'mysql';
// Redis and MySQL spans are client spans too.
const isHttpCall = (span: ReceivedSpan) => span.kind === SPAN_KIND.client && span.attributes['http.request.method'] !== undefined;
const isRedis = (span: ReceivedSpan) => span.attributes['db.system.name'] === 'redis' || span.attributes['db.system'] === 'redis';

/** The gateway's server span for `method path` whose attributes include `attributes`. */
const gatewaySpan = (method: string, path: string, attributes: Record<string, unknown> = {}) => (spans: ReceivedSpan[]) =>
  spans.find(
    (span) =>
      span.service === 'gateway' &&
      span.kind === SPAN_KIND.server &&
      span.attributes['http.request.method'] === method &&
      span.attributes['url.path'] === path &&
      Object.entries(attributes).every(([name, value]) => span.attributes[name] === value),
  );

/**
 * The whole way of a request the gateway passed to products-service, once every part has arrived:
 * the gateway's client span under its server span, products-service's server span under that, and
 * a MySQL statement of `statement` under products-service's.
 */
const throughProducts = (server: ReceivedSpan, statement: string) => (spans: ReceivedSpan[]) => {
  const trace = inTrace(spans, server.traceId);
  const outgoing = trace.find((span) => span.service === 'gateway' && isHttpCall(span) && span.parentSpanId === server.spanId);
  const serving = outgoing && trace.find((span) => span.service === 'products-service' && span.kind === SPAN_KIND.server && span.parentSpanId === outgoing.spanId);
  const query = trace.find((span) => span.service === 'products-service' && isMysql(span) && span.name.startsWith(statement));
  return serving && query ? { outgoing, serving, query, trace } : undefined;
};

/** products-service's spans descend from its server span: none is left outside the request. */
function expectUnder(serving: ReceivedSpan, span: ReceivedSpan, trace: ReceivedSpan[]) {
  const ancestors = new Set<string>();
  for (let at: ReceivedSpan | undefined = span; at; at = trace.find((one) => one.spanId === at!.parentSpanId)) ancestors.add(at.spanId);
  expect(ancestors).toContain(serving.spanId);
}

let productPath: string;

test('a write is one trace: the gateway, its call to products-service, the service and its MySQL statements; log lines carry its id', async () => {
  const created = await api.post('/api/products', { sku: 'TRACE-1', name: 'Traced', price: { amount: '2.5', currency: 'EUR' } });
  expect(created.status).toBe(201);
  productPath = created.headers.get('location')!;

  const server = await receiver.waitFor(gatewaySpan('POST', '/api/products'));
  expect(server).toMatchObject({ name: 'POST /api/products', attributes: expect.objectContaining({ 'http.route': '/api/products', 'http.response.status_code': 201 }) });
  const { serving, query, trace } = await receiver.waitFor(throughProducts(server, 'INSERT'));
  expect(serving.attributes['http.route']).toBe('/api/products');
  expectUnder(serving, query, trace);
  // The write renews the cache's generation for the products in Redis before its client hears back.
  expect(trace.some((span) => span.service === 'gateway' && isRedis(span))).toBe(true);

  const requestId = created.headers.get('x-request-id');
  for (const process of [gateway, products]) {
    const line = await process.logged((line) => line.msg === 'request' && line.requestId === requestId);
    expect(line.trace_id).toBe(server.traceId);
    expect(line.span_id).toMatch(/^[0-9a-f]{16}$/);
  }
});

test('a cache miss is one trace from the gateway to MySQL, named by its route template; the Redis lookup it waited on is in it', async () => {
  const miss = await api.get(productPath);
  expect(miss.headers.get('x-cache')).toBe('MISS');

  const server = await receiver.waitFor(gatewaySpan('GET', productPath, { 'gateway.cache.outcome': 'miss' }));
  expect(server.name).toBe('GET /api/products/{id}');
  expect(server.attributes).toMatchObject({ 'http.route': '/api/products/{id}', 'http.response.status_code': 200 });
  const { serving, query, trace } = await receiver.waitFor(throughProducts(server, 'SELECT'));
  expect(serving.name).toBe('GET /api/products/{id}');
  expectUnder(serving, query, trace);
  expect(trace.some((span) => span.service === 'gateway' && isRedis(span) && span.parentSpanId === server.spanId)).toBe(true);
  // The route template, never the product's id, names the spans.
  expect(trace.map((span) => span.name).join(' ')).not.toContain(productPath.split('/').at(-1));

  const line = await gateway.logged((line) => line.msg === 'request' && line.requestId === miss.headers.get('x-request-id'));
  expect(line.trace_id).toBe(server.traceId);
});

test("a hit is a gateway span of its own with the cache outcome; a client's traceparent is linked, not continued", async () => {
  const clientTrace = '0af7651916cd43dd8448eb211c80319c';
  const hit = await api.get(productPath, { headers: { traceparent: `00-${clientTrace}-b7ad6b7169203331-01` } });
  expect(hit.headers.get('x-cache')).toBe('HIT');

  const server = await receiver.waitFor(gatewaySpan('GET', productPath, { 'gateway.cache.outcome': 'hit' }));
  expect(server.name).toBe('GET /api/products/{id}');
  expect(server.parentSpanId ?? '').toBe('');
  expect(server.traceId).not.toBe(clientTrace);
  expect(server.links).toEqual([expect.objectContaining({ traceId: clientTrace, spanId: 'b7ad6b7169203331' })]);
  expect(receiver.spans.filter((span) => span.traceId === clientTrace)).toEqual([]);
  // products-service was not asked: the trace's spans are all the gateway's.
  const line = await gateway.logged((line) => line.msg === 'request' && line.requestId === hit.headers.get('x-request-id'));
  expect(line.trace_id).toBe(server.traceId);
  expect(new Set(inTrace(receiver.spans, server.traceId).map((span) => span.service))).toEqual(new Set(['gateway']));
});

test('a request proxied to a service that cannot be reached is marked as an error, on the server span and on its call', async () => {
  const failed = await api.post('/api/users', { email: 'nobody@example.com', name: 'Nobody' });
  expectProblem(failed, 502, 'bad-gateway');

  const server = await receiver.waitFor(gatewaySpan('POST', '/api/users'));
  expect(server.status.code).toBe(STATUS_ERROR);
  expect(server.attributes['http.response.status_code']).toBe(502);
  const outgoing = await receiver.waitFor((spans) => inTrace(spans, server.traceId).find(isHttpCall));
  expect(outgoing.status.code).toBe(STATUS_ERROR);
  const line = await gateway.logged((line) => line.msg === 'request failed' && line.requestId === failed.headers.get('x-request-id'));
  expect(line.trace_id).toBe(server.traceId);
});

test('a request proxied to a service that does not answer in time (504) is marked as an error, on the server span and on its call', async () => {
  const failed = await timingOutApi.post('/api/users', { email: 'slow@example.com', name: 'Slow' });
  expectProblem(failed, 504, 'gateway-timeout');

  const server = await receiver.waitFor((spans) =>
    spans.find((span) => span.service === 'gateway-timing-out' && span.kind === SPAN_KIND.server && span.attributes['http.response.status_code'] === 504),
  );
  expect(server.status.code).toBe(STATUS_ERROR);
  const outgoing = await receiver.waitFor((spans) => inTrace(spans, server.traceId).find(isHttpCall));
  expect(outgoing.status.code).toBe(STATUS_ERROR);
});

test("behind a trusted proxy (TRACE_TRUST_CLIENT_CONTEXT), the gateway continues the client's trace; TRACE_RECORD_SUBJECT puts the subject on it", async () => {
  const clientTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
  const read = await trustingApi.get(productPath, { headers: { traceparent: `00-${clientTrace}-00f067aa0ba902b7-01` } });
  expect(read.status).toBe(200);

  const server = await receiver.waitFor((spans) =>
    spans.find((span) => span.service === 'gateway-behind-proxy' && span.kind === SPAN_KIND.server && span.traceId === clientTrace),
  );
  expect(server).toMatchObject({ parentSpanId: '00f067aa0ba902b7', links: [], attributes: expect.objectContaining({ 'enduser.id': 'test-client' }) });
  // The default gateway records no subject.
  expect(receiver.spans.filter((span) => span.service === 'gateway' && 'enduser.id' in span.attributes)).toEqual([]);
});

test('OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf exports in protobuf', async () => {
  const protobufApi = client(await gatewayUrl(protobuf));
  expect((await protobufApi.get(productPath)).status).toBe(200);
  const [first] = await receiver.waitFor(() => (receiver.protobufExports.length > 0 ? receiver.protobufExports : undefined));
  expect(first!.bytes).toBeGreaterThan(0);
});

test("a request the gateway does not sample is traced nowhere: products-service follows the gateway's decision", async () => {
  const created = await api.post('/api/products', { sku: 'TRACE-2', name: 'Not traced', price: { amount: '1', currency: 'EUR' } });
  const path = created.headers.get('location')!;
  const unsampledApi = client(await gatewayUrl(unsampled));
  // A cache fill and a proxied write: the gateway's two ways to a service.
  const miss = await unsampledApi.get(path);
  expect(miss.headers.get('x-cache')).toBe('MISS');
  expect((await unsampledApi.patch(path, { name: 'Not traced either' })).status).toBe(200);
  // products-service sends its spans in the order they end: once those of a later request (a write
  // in a trace of the test's own, through the gateway that continues it) have arrived, the
  // unsampled read's would have too.
  const laterTrace = '5d2c6a0f4e1b4c6d8a9b0c1d2e3f4a5b';
  const later = await trustingApi.post('/api/products', { sku: 'TRACE-3', name: 'Traced after', price: { amount: '1', currency: 'EUR' } }, { headers: { traceparent: `00-${laterTrace}-1a2b3c4d5e6f7a8b-01` } });
  expect(later.status).toBe(201);
  await receiver.waitFor((spans) => spans.find((span) => span.service === 'products-service' && span.traceId === laterTrace));
  expect(receiver.spans.filter((span) => span.attributes['url.path'] === path)).toEqual([]);
  expect(receiver.spans.filter((span) => span.service === 'gateway-unsampled')).toEqual([]);
});

test('the token never reaches a span', () => {
  expect(JSON.stringify(receiver.spans)).not.toContain(defaultToken);
});
