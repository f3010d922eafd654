/**
 * Hop-by-hop headers stop at the gateway: what a client says about its own connection (Connection,
 * Keep-Alive, TE, Upgrade, Proxy-*, Transfer-Encoding, and the headers its Connection names) never
 * reaches a service, on a proxied write or on a cache fill; and the gateway's connection to the
 * service stays kept-alive whatever the client's Connection says.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { SUBJECT_HEADER } from '@app/shared/platform/subject';
import { DEFAULT_SUBJECT, defaultToken } from '../support/auth.js';
import { startGateway, type RunningGateway } from '../support/stack.js';

interface Heard {
  method: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  connection: number;
}

const heard: Heard[] = [];
let connections = 0;
const service = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    heard.push({ method: req.method ?? '', headers: req.headers, body: Buffer.concat(chunks).toString(), connection: (req.socket as Socket & { id: number }).id });
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"1"}');
  });
});
service.on('connection', (socket: Socket & { id?: number }) => (socket.id = ++connections));
let gateway: RunningGateway;

beforeAll(async () => {
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
  gateway = await startGateway({ upstreams: { users: url, products: url }, cache: {} });
});
afterAll(async () => {
  await gateway.close();
  service.closeAllConnections();
  await new Promise((resolve) => service.close(resolve));
});
beforeEach(() => (heard.length = 0));

/** What a client writes about its own connection, and a header its Connection names: none of it is the service's. */
const HOSTILE = {
  connection: `close, X-Foo, ${SUBJECT_HEADER}`,
  'x-foo': '1',
  'keep-alive': 'timeout=5',
  te: 'trailers',
  upgrade: 'websocket',
  'proxy-authorization': 'Basic dXNlcjpwYXNz',
  'proxy-connection': 'keep-alive',
  'x-kept': 'end-to-end',
};
const STAYING = ['x-foo', 'keep-alive', 'te', 'upgrade', 'proxy-authorization', 'proxy-connection', 'transfer-encoding'];

/** One request on a connection of its own (the client's `Connection: close`), a body sent chunked when given. */
function send(method: string, path: string, body?: string, headers: http.OutgoingHttpHeaders = HOSTILE): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${gateway.url}${path}`, { method, agent: false, headers: { ...headers, authorization: `Bearer ${defaultToken}`, 'content-type': 'application/json' } }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    request.on('error', reject);
    if (body !== undefined) request.write(body);
    request.end();
  });
}

function expectOnlyEndToEnd(headers: http.IncomingHttpHeaders) {
  for (const name of STAYING) expect(headers).not.toHaveProperty(name);
  // The gateway's own connection to the service, not the client's.
  expect(headers.connection).toBe('keep-alive');
  expect(headers['x-kept']).toBe('end-to-end');
  // A header the gateway set (who the caller is) stays, whatever the client's Connection names.
  expect(headers[SUBJECT_HEADER]).toBe(DEFAULT_SUBJECT);
}

test('proxied writes reach the service without them, their bodies framed anew, over one kept-alive connection', async () => {
  expect(await send('PATCH', '/api/users/0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40', '{"name":"a"}')).toBe(200);
  expect(await send('PATCH', '/api/users/0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40', '{"name":"b"}')).toBe(200);
  expect(heard.map(({ body }) => body)).toEqual(['{"name":"a"}', '{"name":"b"}']);
  for (const { headers } of heard) {
    expectOnlyEndToEnd(headers);
    expect(headers['content-length']).toBe('12');
  }
  // And the plain, usual `Connection: close` of a client.
  expect(await send('PATCH', '/api/users/0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40', '{"name":"c"}', { connection: 'close' })).toBe(200);
  const [first, second, third] = heard;
  expect(third!.headers.connection).toBe('keep-alive');
  expect([second!.connection, third!.connection]).toEqual([first!.connection, first!.connection]);
});

test('a cache fill reaches the service without them', async () => {
  expect(await send('GET', '/api/users/0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d41')).toBe(200);
  expect(heard).toHaveLength(1);
  expectOnlyEndToEnd(heard[0]!.headers);
});
