/**
 * Every connection's budget, over real sockets against a real listen(): each request head, a body
 * (an answered one too), and room: per peer address and in all.
 */
import net from 'node:net';
import { listen, type RunningServer } from '../src/platform/server.js';
import { refused, served, statusLines, trickled } from '../../test/support/held-connections.js';

const HEAD_MS = 100;
const BODY_MS = 100;
const GET = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';

const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((running) => running.close(100)));
});

/** A server answering 405 to a POST without reading its body, 200 to anything else. */
async function server(budget: Parameters<typeof listen>[5]): Promise<RunningServer> {
  const running = await listen((req, res) => {
    res.statusCode = req.method === 'POST' ? 405 : 200;
    res.end();
  }, 0, '127.0.0.1', undefined, 1, budget);
  servers.push(running);
  return running;
}

it('closes a kept-alive connection whose second request head is trickled past REQUEST_HEAD_TIMEOUT_MS, with a 408', async () => {
  const { port } = await server({ headMs: HEAD_MS, bodyMs: BODY_MS });
  const received = await trickled(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 'GET /healthz HTTP/1.1\r\nX-Slow: ', 'a');
  expect(statusLines(received)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 408 Request Timeout']);
});

it('closes a connection whose request, answered before its body was read, goes on trickling its body, with no second answer', async () => {
  const { port } = await server({ headMs: HEAD_MS, bodyMs: BODY_MS });
  const received = await trickled(port, 'POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n', '', 'a');
  expect(statusLines(received)).toEqual(['HTTP/1.1 405 Method Not Allowed']);
});

it('closes a kept-alive connection that sends a CRLF now and then, which starts no request, once idle and head time are over', async () => {
  const { port } = await server({ headMs: HEAD_MS, idleMs: 100 });
  const received = await trickled(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', '', '\r\n');
  expect(statusLines(received)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 408 Request Timeout']);
});

/**
 * `count` requests on one connection, each sent `gapMs` after the response before it; what came
 * back once the last was answered or the server closed the connection.
 */
function spaced(port: number, count: number, gapMs: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(GET));
    let received = '';
    let pause: NodeJS.Timeout | undefined;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (statusLines(received).length >= count) socket.end();
      else pause = setTimeout(() => socket.write(GET), gapMs);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(pause);
      resolve(received);
    });
  });
}

it('keeps a kept-alive connection open while each request comes within the keep-alive time of the response before it', async () => {
  const { port } = await server({ headMs: HEAD_MS, idleMs: 1_000 });
  // The third request comes 1,200 ms after the first response, past the keep-alive and head time
  // (1,100 ms) counted from that one, but 600 ms after the second response.
  const received = await spaced(port, 3, 600);
  expect(statusLines(received)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
});

/** The server's side of the next connection it accepts has closed. */
const nextServerSideClose = (running: RunningServer) =>
  new Promise((resolve) => running.server.once('connection', (socket: net.Socket) => socket.once('close', resolve)));

it('refuses the connection over MAX_CONNECTIONS_PER_ADDRESS from one peer address, and takes one from another address, or once one closed', async () => {
  const running = await server({ perAddress: 2 });
  const firstClosed = nextServerSideClose(running);
  const [first, second] = [await served(running.port, '127.0.0.1'), await served(running.port, '127.0.0.1')];
  try {
    expect({ third: await refused(running.port, '127.0.0.1'), otherAddress: await refused(running.port, '127.0.0.2') }).toEqual({ third: true, otherAddress: false });
    first.destroy();
    await firstClosed;
    expect(await refused(running.port, '127.0.0.1')).toBe(false);
  } finally {
    for (const socket of [first, second]) socket.destroy();
  }
});

it('refuses the connection over MAX_CONNECTIONS, whatever its address', async () => {
  const running = await server({ total: 2 });
  const held = [await served(running.port, '127.0.0.2'), await served(running.port, '127.0.0.3')];
  try {
    expect(await refused(running.port, '127.0.0.4')).toBe(true);
  } finally {
    for (const socket of held) socket.destroy();
  }
});
