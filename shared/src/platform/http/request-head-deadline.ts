import type http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../logger.js';
import { HttpProblem } from '../problem.js';
import { writeRawProblem } from './raw-problem.js';

/** Until a connection's first request head is complete, the timer that closes it when none comes in time. */
const HEAD_DEADLINE = Symbol('first request head deadline');
type SocketAwaitingHead = Duplex & { [HEAD_DEADLINE]?: NodeJS.Timeout };

/** REQUEST_HEAD_TIMEOUT_MS by default: how long a new connection may take to send its first request head. */
export const DEFAULT_REQUEST_HEAD_TIMEOUT_MS = 10_000;

/** Connections this process closed because no request head came in time (the gateway's metrics read it). */
export const connectionsWithoutRequest = { closed: 0 };

/** How often at most the closes of connections without a request are logged (with their count). */
const SILENT_CLOSE_LOG_INTERVAL_MS = 60_000;

/** The socket's first request head is complete (or refused): its deadline no longer applies. */
export function headArrived(socket: Duplex): void {
  const tracked = socket as SocketAwaitingHead;
  const deadline = tracked[HEAD_DEADLINE];
  if (deadline === undefined) return;
  clearTimeout(deadline);
  tracked[HEAD_DEADLINE] = undefined;
}

function deadlineGone(this: Duplex): void {
  headArrived(this);
}

/**
 * Closes a connection whose first request head is not complete within `timeoutMs` of accept. Node
 * times a request head only once its first byte came (headersTimeout), so a connection that sends
 * nothing would otherwise stay open for good, holding a file descriptor. One that sent part of a
 * head gets a 408; one that sent nothing is just closed. After the first request, keepAliveTimeout
 * and headersTimeout take over. Counted, and logged at most once per SILENT_CLOSE_LOG_INTERVAL_MS.
 */
export function closeConnectionsWithoutRequest(server: http.Server, timeoutMs: number, logger: Logger | undefined): void {
  let unlogged = 0;
  let loggedAt = -Infinity;
  const expire = (socket: net.Socket) => {
    (socket as SocketAwaitingHead)[HEAD_DEADLINE] = undefined;
    if (socket.destroyed || !socket.writable) return;
    connectionsWithoutRequest.closed++;
    unlogged++;
    if (performance.now() - loggedAt >= SILENT_CLOSE_LOG_INTERVAL_MS) {
      logger?.info({ closed: unlogged, requestHeadTimeoutMs: timeoutMs }, 'closed connections that sent no request in time');
      loggedAt = performance.now();
      unlogged = 0;
    }
    if (socket.bytesRead > 0) writeRawProblem(socket, new HttpProblem('request-timeout', 'The request did not arrive in time'));
    else socket.destroy();
  };
  server.on('connection', (socket: net.Socket) => {
    (socket as SocketAwaitingHead)[HEAD_DEADLINE] = setTimeout(expire, timeoutMs, socket).unref();
    // A connection that goes first takes its deadline along: the timer would hold the socket till then.
    socket.once('close', deadlineGone);
  });
}
