import type http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../logger.js';
import { HttpProblem } from '../problem.js';
import { writeRawProblem } from './raw-problem.js';

/**
 * A connection between requests: whether it waits for a request head now, since when and its bytes
 * read when it began to wait (more since: a head under way), and the timers that close it when none
 * comes in time, the first head's and the later heads'. A response only notes the time: the later
 * heads' timer, when it fires early for the wait under way, is set again for what is left of it,
 * so a connection's many responses cost no timer operation each.
 */
interface HeadWait {
  waiting: boolean;
  waitingSince: number;
  bytesBefore: number;
  first?: NodeJS.Timeout;
  next?: NodeJS.Timeout;
}
const HEAD_WAIT = Symbol('request head wait');
type SocketAwaitingHead = Duplex & { [HEAD_WAIT]?: HeadWait };

/** REQUEST_HEAD_TIMEOUT_MS by default: how long each request head may take (the first from accept, a later one after the keep-alive wait). */
export const DEFAULT_REQUEST_HEAD_TIMEOUT_MS = 10_000;

/** Connections this process closed because no request head came in time (the gateway's metrics read it). */
export const connectionsWithoutRequest = { closed: 0 };

/** How often at most the closes of connections without a request are logged (with their count). */
const SILENT_CLOSE_LOG_INTERVAL_MS = 60_000;

/** A request head on the socket is complete (or refused): no deadline applies until its response is done. */
export function headArrived(socket: Duplex): void {
  const wait = (socket as SocketAwaitingHead)[HEAD_WAIT];
  if (wait === undefined) return;
  wait.waiting = false;
  clearTimeout(wait.first);
  wait.first = undefined;
}

function deadlinesGone(this: SocketAwaitingHead): void {
  const wait = this[HEAD_WAIT];
  clearTimeout(wait?.first);
  clearTimeout(wait?.next);
}

/** How long a connection may take: to send its first request head after accept, and its next one after a response. */
export interface HeadDeadlines {
  /** REQUEST_HEAD_TIMEOUT_MS. */
  firstMs: number;
  /** The keep-alive timeout plus REQUEST_HEAD_TIMEOUT_MS. */
  nextMs: number;
}

/**
 * Closes a connection whose first request head is not complete within `deadlines.firstMs` of
 * accept, or whose next one is not within `deadlines.nextMs` of the response before it. Node times
 * a head only from its first byte (headersTimeout), and a connection idle past a response only while
 * no byte comes (keepAliveTimeout): one that sends nothing would stay open for good, one that sends
 * a CRLF now and then too (the parser skips them between requests, and each byte renews the idle
 * timer). One that sent part of a head gets a 408; one that sent nothing is just closed. Counted, and
 * logged at most once per SILENT_CLOSE_LOG_INTERVAL_MS. Returns what the server calls once a
 * response is done and no later request has come: the connection waits for its next head.
 */
export function closeConnectionsWithoutRequest(server: http.Server, deadlines: HeadDeadlines, logger: Logger | undefined): (socket: net.Socket) => void {
  let unlogged = 0;
  let loggedAt = -Infinity;
  const expire = (socket: net.Socket & SocketAwaitingHead, wait: HeadWait) => {
    if (!wait.waiting || socket.destroyed || !socket.writable) return;
    wait.waiting = false;
    connectionsWithoutRequest.closed++;
    unlogged++;
    if (performance.now() - loggedAt >= SILENT_CLOSE_LOG_INTERVAL_MS) {
      logger?.info({ closed: unlogged, requestHeadTimeoutMs: deadlines.firstMs }, 'closed connections that sent no request in time');
      loggedAt = performance.now();
      unlogged = 0;
    }
    if (socket.bytesRead > wait.bytesBefore) writeRawProblem(socket, new HttpProblem('request-timeout', 'The request did not arrive in time'));
    else socket.destroy();
  };
  const firstDue = (socket: net.Socket & SocketAwaitingHead) => {
    const wait = socket[HEAD_WAIT];
    if (wait === undefined) return;
    wait.first = undefined;
    expire(socket, wait);
  };
  const nextDue = (socket: net.Socket & SocketAwaitingHead) => {
    const wait = socket[HEAD_WAIT];
    if (wait === undefined) return;
    wait.next = undefined;
    const left = wait.waitingSince + deadlines.nextMs - performance.now();
    if (wait.waiting && left > 0) wait.next = setTimeout(nextDue, left, socket).unref();
    else expire(socket, wait);
  };
  server.on('connection', (socket: net.Socket & SocketAwaitingHead) => {
    socket[HEAD_WAIT] = { waiting: true, waitingSince: 0, bytesBefore: 0, first: setTimeout(firstDue, deadlines.firstMs, socket).unref() };
    // A connection that goes first takes its deadlines along: a timer would hold the socket till then.
    socket.once('close', deadlinesGone);
  });
  return (socket: net.Socket & SocketAwaitingHead) => {
    const wait = socket[HEAD_WAIT];
    if (wait === undefined || socket.destroyed) return;
    wait.waiting = true;
    wait.waitingSince = performance.now();
    wait.bytesBefore = socket.bytesRead;
    // A timer already set fires early for this wait, and is set again for the rest (`nextDue`).
    wait.next ??= setTimeout(nextDue, deadlines.nextMs, socket).unref();
  };
}
