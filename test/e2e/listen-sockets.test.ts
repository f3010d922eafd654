/**
 * LISTEN_SOCKETS: a server takes in new connections on several listening sockets that share its
 * port, because a busy event loop accepts only one connection per listening socket per turn. Every
 * connection is served and drained the same, whichever socket accepted it.
 */
import http from 'node:http';
import net from 'node:net';
import { listen, type RunningServer } from '@app/shared/platform/server';
import { refusesConnections } from '../support/raw-socket.js';

/** Answers once the whole request body has arrived. */
const echo: http.RequestListener = (req, res) => {
  req.resume();
  req.on('end', () => res.end('ok'));
};

const servers: RunningServer[] = [];
async function start(sockets: number): Promise<RunningServer> {
  const running = await listen(echo, 0, '127.0.0.1', undefined, sockets);
  servers.push(running);
  return running;
}
afterAll(() => Promise.all(servers.map((running) => running.close(1_000))));

/** How many of `count` connections opened at once the server takes in during the first turn of its event loop that sees them. */
async function acceptedInOneTurn(running: RunningServer, count: number): Promise<number> {
  let accepted = 0;
  const onConnection = () => accepted++;
  running.server.on('connection', onConnection);
  const clients = Array.from({ length: count }, () => net.connect({ host: '127.0.0.1', port: running.port }));
  try {
    // Loopback connections are complete in the kernel once connect() returns; Node calls it on the next tick.
    await new Promise((resolve) => process.nextTick(resolve));
    // The next poll phase sees every listening socket with a connection waiting; setImmediate runs right after it.
    while (accepted === 0) await new Promise((resolve) => setImmediate(resolve));
    return accepted;
  } finally {
    running.server.off('connection', onConnection);
    for (const socket of clients) socket.destroy();
  }
}

/** A POST whose body is only half sent, on a connection of its own, until `finish()`. */
function halfSentPost(port: number) {
  const request = http.request({ host: '127.0.0.1', port, path: '/', method: 'POST', agent: false, headers: { 'content-length': 4 } });
  const response = new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
    request.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
    });
    request.on('error', reject);
  });
  request.write('ab');
  return { response, finish: () => request.end('cd') };
}

it('takes in one waiting connection per turn of its event loop with one listening socket', async () => {
  expect(await acceptedInOneTurn(await start(1), 64)).toBe(1);
});

it('takes in several per turn with several listening sockets sharing the port (SO_REUSEPORT: Linux; one socket elsewhere)', async () => {
  const accepted = await acceptedInOneTurn(await start(16), 64);
  if (process.platform === 'linux') {
    expect(accepted).toBeGreaterThan(1);
    expect(accepted).toBeLessThanOrEqual(16);
  } else expect(accepted).toBe(1);
});

it('serves every connection and drains every in-flight request on close, whichever socket accepted it', async () => {
  const running = await start(8);
  // Connections of their own land on all eight sockets (the kernel spreads them by address and port).
  const inFlight = Array.from({ length: 24 }, () => halfSentPost(running.port));
  const served = await Promise.all(
    Array.from({ length: 24 }, () => new Promise<number>((resolve, reject) => http.get({ host: '127.0.0.1', port: running.port, agent: false }, (res) => resolve(res.resume().statusCode!)).on('error', reject))),
  );
  expect(served).toEqual(Array(24).fill(200));

  let closed = false;
  const closing = running.close(10_000).then(() => (closed = true));
  expect(await refusesConnections(running.port)).toBe(true);
  expect(closed).toBe(false);
  for (const request of inFlight) request.finish();
  expect(await Promise.all(inFlight.map((request) => request.response))).toEqual(Array(24).fill({ status: 200, connection: 'close' }));
  await closing;
});

it('refuses a port another process already listens on (EADDRINUSE), as a single socket would', async () => {
  const first = await start(8);
  await expect(listen(echo, first.port, '127.0.0.1', undefined, 8)).rejects.toMatchObject({ code: 'EADDRINUSE' });
  const response = await fetch(`http://127.0.0.1:${first.port}/`);
  expect(await response.text()).toBe('ok');
});
