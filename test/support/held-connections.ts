/**
 * Clients that hold a connection open: a request trickled byte by byte, and connections that stay
 * open once answered; what the server did with them, each within a bounded wait.
 */
import net from 'node:net';

/** Longer than any budget the tests set, with Node's check interval on top; far shorter than Node's own defaults (66 s, 300 s). */
export const CLOSED_WITHIN_MS = 3_000;

/**
 * A connection that sends `request`, then, once answered, `next` and a byte of `trickle` every
 * 20 ms: what it received when the server closed it, or a rejection after CLOSED_WITHIN_MS.
 */
export function trickled(port: number, request: string, next: string, trickle: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(request));
    let received = '';
    let dripping: NodeJS.Timeout | undefined;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (dripping !== undefined) return;
      socket.write(next);
      dripping = setInterval(() => socket.write(trickle), 20);
    });
    socket.on('error', () => undefined);
    const deadline = setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open ${CLOSED_WITHIN_MS} ms on; received: ${received}`));
    }, CLOSED_WITHIN_MS);
    socket.on('close', () => {
      clearInterval(dripping);
      clearTimeout(deadline);
      resolve(received);
    });
  });
}

/** The status lines of the responses in `received` (a response may follow a body on its line). */
export const statusLines = (received: string) => received.match(/HTTP\/1\.1 \d{3} [^\r]*/g) ?? [];

const GET = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';

/** A connection from `localAddress` (an address of this machine) with one request answered: the server holds it, kept alive. */
export function served(port: number, localAddress: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress }, () => socket.write(GET));
    socket.once('data', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Whether the server closes a new connection from `localAddress` without answering its request. */
export function refused(port: number, localAddress: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress }, () => socket.write(GET));
    socket.on('error', () => undefined);
    const deadline = setTimeout(() => reject(new Error(`neither answered nor closed within ${CLOSED_WITHIN_MS} ms`)), CLOSED_WITHIN_MS);
    socket.once('data', () => {
      clearTimeout(deadline);
      socket.destroy();
      resolve(false);
    });
    socket.once('close', () => {
      clearTimeout(deadline);
      resolve(true);
    });
  });
}
