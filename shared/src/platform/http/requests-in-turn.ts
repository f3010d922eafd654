import type { RequestListener } from 'node:http';
import type { Duplex } from 'node:stream';

/** Requests of a connection waiting for their turn. */
const WAITING = Symbol('requests waiting for their turn');
type SocketWithWaiting = Duplex & { [WAITING]?: number };

/** Pipelined requests that may wait behind an unfinished response on one connection; one more closes it. */
export const MAX_WAITING_REQUESTS = 16;

/**
 * Hands a pipelined request to `handler` only when its response is next to be sent (Node gives the
 * response its socket then): a request waiting behind an unread response opens nothing (a file,
 * an upstream request) that the client may never take. Node's own handling would let each open
 * its file and hold it for good once the client left. A connection with more than
 * MAX_WAITING_REQUESTS waiting is closed; requests still waiting when it closes are dropped.
 */
export function inTurn(handler: RequestListener): RequestListener {
  return (req, res) => {
    if (res.socket !== null) {
      handler(req, res);
      return;
    }
    const socket = req.socket as SocketWithWaiting;
    const waiting = (socket[WAITING] ?? 0) + 1;
    if (waiting > MAX_WAITING_REQUESTS) {
      socket.destroy();
      return;
    }
    socket[WAITING] = waiting;
    const dropped = () => {
      res.off('socket', turn);
      socket[WAITING] = (socket[WAITING] ?? 1) - 1;
    };
    const turn = () => {
      res.off('close', dropped);
      socket[WAITING] = (socket[WAITING] ?? 1) - 1;
      handler(req, res);
    };
    res.once('socket', turn);
    res.once('close', dropped);
  };
}
