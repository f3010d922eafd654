import type http from 'node:http';
import net, { type AddressInfo } from 'node:net';

/** Connections the kernel may hold for accept() on each listening socket (capped by net.core.somaxconn). */
export const LISTEN_BACKLOG = 4_096;

/**
 * Listening sockets per process by default (LISTEN_SOCKETS). Node (libuv since 1.45) accepts one
 * connection per listening socket per turn of the event loop, and a turn of a busy server reads every
 * connection that has a request waiting: so under load one socket takes in few connections a second
 * while the rest wait, their requests already sent, in the kernel's accept queue, where no metric of
 * ours sees them. Sockets sharing the port (SO_REUSEPORT; the kernel spreads new connections over
 * them) each take one per turn. Linux only: elsewhere one socket.
 */
export const DEFAULT_LISTEN_SOCKETS = 64;

function listenOn(server: net.Server, options: net.ListenOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * `server` listens on the first of `sockets` listening sockets sharing the port (SO_REUSEPORT); the
 * others only accept, and hand each connection to `server`, which serves and tracks it like its own
 * (the documented way to give a server a connection). Returns those others; on failure none is left.
 */
export async function listenShared(server: http.Server, options: net.ListenOptions, sockets: number): Promise<net.Server[]> {
  const acceptors: net.Server[] = [];
  if (sockets > 1 && options.port) {
    // SO_REUSEPORT would let this process share a port another one already listens on (two
    // gateways started on one port would each get half the connections): a plain listen first
    // fails with EADDRINUSE as a single socket would, and is closed before the shared ones open.
    const probe = net.createServer();
    await listenOn(probe, { ...options, reusePort: false });
    await new Promise((resolve) => probe.close(resolve));
  }
  try {
    await listenOn(server, { ...options, reusePort: sockets > 1 });
    const port = (server.address() as AddressInfo).port;
    for (let i = 1; i < sockets; i++) {
      const acceptor = net.createServer({ allowHalfOpen: true, noDelay: true }, (socket) => server.emit('connection', socket));
      acceptors.push(acceptor);
      await listenOn(acceptor, { ...options, port, reusePort: true });
    }
    return acceptors;
  } catch (error) {
    for (const one of [server, ...acceptors]) if (one.listening) one.close();
    throw error;
  }
}
