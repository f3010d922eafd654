import { randomUUID } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { RequestListener } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Lifecycle } from './http/lifecycle.js';
import { NOSNIFF, writeProblem } from './http/responses.js';
import type { Logger } from './logger.js';
import { flushTelemetry, traceRequests } from '../telemetry/spans.js';
import { HttpProblem } from './problem.js';

/**
 * Longer than any client's idle keep-alive (the gateway's agent keeps idle sockets for
 * UPSTREAM_IDLE_SOCKET_MS), so the server never closes a socket a client is about to reuse.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** The longest request target (path and query) a server takes; a longer one is a 414. */
export const MAX_REQUEST_TARGET_BYTES = 8 * 1024;

/** What Node's HTTP parser reports about a request it cannot take (`clientError`). */
interface ClientError extends Error {
  code?: string;
  reason?: string;
  rawPacket?: Buffer;
}

/** The request line of what the client sent, when it was complete: `METHOD target HTTP/x.y`. */
function requestLine(rawPacket: Buffer | undefined): string | undefined {
  if (!rawPacket) return undefined;
  const end = rawPacket.indexOf('\r\n');
  return end < 0 ? undefined : rawPacket.subarray(0, end).toString('latin1');
}

/**
 * The problem for a request Node's HTTP server rejects before any handler sees it: header fields
 * over its limit (431) or a request line over it (414), too slow to arrive (408), anything the
 * parser cannot read (400: bad method token, Content-Length with Transfer-Encoding, …).
 */
export function clientErrorProblem(error: ClientError): HttpProblem {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW': {
      const line = requestLine(error.rawPacket);
      if (line === undefined || line.length > MAX_REQUEST_TARGET_BYTES) {
        return new HttpProblem('uri-too-long', `The request target is longer than ${MAX_REQUEST_TARGET_BYTES} bytes`);
      }
      return new HttpProblem('header-fields-too-large', `The request header fields are larger than ${http.maxHeaderSize} bytes`);
    }
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new HttpProblem('request-timeout', 'The request did not arrive in time');
    default:
      return new HttpProblem('bad-request', `The request is not valid HTTP/1.1${error.reason ? `: ${error.reason.replace(/[^\x20-\x7e]/g, '')}` : ''}`);
  }
}

/** A problem+json response written straight to the socket, which then closes. */
export function writeRawProblem(socket: Duplex, problem: HttpProblem, instance = '/'): void {
  const body = JSON.stringify(problem.toJSON(instance));
  const headers = [
    `HTTP/1.1 ${problem.status} ${http.STATUS_CODES[problem.status] ?? ''}`,
    'Content-Type: application/problem+json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${randomUUID()}`,
    `${NOSNIFF[0]}: ${NOSNIFF[1]}`,
    ...Object.entries(problem.extras.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
    'Connection: close',
  ];
  socket.end(`${headers.join('\r\n')}\r\n\r\n${body}`);
}

/**
 * What a connection owes: how many of its requests still have a response to finish, the response
 * to the last request handed to a handler, and a refusal waiting for those responses; and, until
 * its first request head is complete, the timer that closes it when none comes in time.
 */
const PENDING = Symbol('responses pending');
const LAST_RESPONSE = Symbol('last response');
const REFUSAL = Symbol('refusal after the pending responses');
const HEAD_DEADLINE = Symbol('first request head deadline');
const WAITING = Symbol('requests waiting for their turn');
type TrackedSocket = Duplex & {
  [PENDING]?: number;
  [LAST_RESPONSE]?: http.ServerResponse;
  [REFUSAL]?: () => void;
  [HEAD_DEADLINE]?: NodeJS.Timeout;
  [WAITING]?: number;
};

/** REQUEST_HEAD_TIMEOUT_MS by default: how long a new connection may take to send its first request head. */
export const DEFAULT_REQUEST_HEAD_TIMEOUT_MS = 10_000;

/** Connections this process closed because no request head came in time (the gateway's metrics read it). */
export const connectionsWithoutRequest = { closed: 0 };

/** How often at most the closes of connections without a request are logged (with their count). */
const SILENT_CLOSE_LOG_INTERVAL_MS = 60_000;

/** The socket's first request head is complete (or refused): its deadline no longer applies. */
function headArrived(socket: Duplex): void {
  const tracked = socket as TrackedSocket;
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
function closeConnectionsWithoutRequest(server: http.Server, timeoutMs: number, logger: Logger | undefined): void {
  let unlogged = 0;
  let loggedAt = -Infinity;
  const expire = (socket: net.Socket) => {
    (socket as TrackedSocket)[HEAD_DEADLINE] = undefined;
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
    (socket as TrackedSocket)[HEAD_DEADLINE] = setTimeout(expire, timeoutMs, socket).unref();
    // A connection that goes first takes its deadline along: the timer would hold the socket till then.
    socket.once('close', deadlineGone);
  });
}

/** A request came on its socket: `res` is to be sent before any refusal of what followed it. */
function responseOwed(res: http.ServerResponse): void {
  const tracked = res.req.socket as TrackedSocket;
  tracked[PENDING] = (tracked[PENDING] ?? 0) + 1;
  tracked[LAST_RESPONSE] = res;
}

/** A response of `socket` is done: the refusal waiting for it goes out once it was the last. */
function responseDone(socket: Duplex): void {
  const tracked = socket as TrackedSocket;
  const pending = (tracked[PENDING] ?? 1) - 1;
  tracked[PENDING] = pending;
  const refusal = tracked[REFUSAL];
  if (pending > 0 || !refusal) return;
  tracked[REFUSAL] = undefined;
  refusal();
}

/**
 * Answers Node's own HTTP errors (`clientError`) with problem+json instead of an empty response.
 * Requests pipelined before the one refused are answered first, in order (a POST that created a
 * resource says so before the 400 that ends the connection).
 */
function answerClientErrors(server: http.Server, logger: Logger | undefined): void {
  server.on('clientError', (error: ClientError, socket: Duplex) => {
    const tracked = socket as TrackedSocket;
    headArrived(socket);
    if (tracked[REFUSAL]) return; // the parser is past the request already refused
    // While the last request's body is incomplete and its response unfinished, the error is that
    // request's own; otherwise it is a later request's, refused once the earlier ones are answered.
    const last = tracked[LAST_RESPONSE];
    const ownError = last !== undefined && !last.req.complete && !last.writableEnded;
    // A response already under way on this socket cannot be replaced: only cut it.
    if (error.code === 'ECONNRESET' || !socket.writable || (ownError && last.headersSent)) {
      socket.destroy();
      return;
    }
    const problem = clientErrorProblem(error);
    const target = requestLine(error.rawPacket)?.split(' ')[1]?.split('?', 1)[0];
    logger?.info({ code: error.code, status: problem.status }, 'request refused by the HTTP parser');
    const refuse = () => {
      if (socket.writable) writeRawProblem(socket, problem, target?.startsWith('/') && target.length <= 2048 ? target : '/');
      else socket.destroy();
    };
    if (!ownError && (tracked[PENDING] ?? 0) > 0) tracked[REFUSAL] = refuse;
    else refuse();
  });
}

/** Answers a request no handler should see with a problem+json, and closes its connection. */
function refuse(res: http.ServerResponse, problem: HttpProblem): void {
  res.setHeader('X-Request-Id', randomUUID());
  res.setHeader('Connection', 'close');
  writeProblem(res, '/', problem);
}

/** How many `Host` header fields a request has (Node keeps only the first in `headers`). */
function hostFields(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length === 4 && name.toLowerCase() === 'host') count++;
  }
  return count;
}

/**
 * What Node lets through but no handler should see: a request target over
 * MAX_REQUEST_TARGET_BYTES that still fit Node's header limit (414), and an HTTP/1.1 request
 * without exactly one Host (400, RFC 9112 §3.2; Node's own answer to a missing one would be an
 * empty 400, so the server leaves it here).
 */
function refuseMalformedRequests(handler: RequestListener): RequestListener {
  return (req, res) => {
    if ((req.url ?? '').length > MAX_REQUEST_TARGET_BYTES) {
      refuse(res, new HttpProblem('uri-too-long', `The request target is longer than ${MAX_REQUEST_TARGET_BYTES} bytes`));
    } else if (req.httpVersion === '1.1' && req.headers.host === undefined) {
      refuse(res, new HttpProblem('bad-request', 'An HTTP/1.1 request must have a Host header field'));
    } else if (hostFields(req.rawHeaders) > 1) {
      refuse(res, new HttpProblem('bad-request', 'A request must not have more than one Host header field'));
    } else handler(req, res);
  };
}

/** Pipelined requests that may wait behind an unfinished response on one connection; one more closes it. */
export const MAX_WAITING_REQUESTS = 16;

/**
 * Hands a pipelined request to `handler` only when its response is next to be sent (Node gives the
 * response its socket then): a request waiting behind an unread response opens nothing (a file,
 * an upstream request) that the client may never take. Node's own handling would let each open
 * its file and hold it for good once the client left. A connection with more than
 * MAX_WAITING_REQUESTS waiting is closed; requests still waiting when it closes are dropped.
 */
function inTurn(handler: RequestListener): RequestListener {
  return (req, res) => {
    if (res.socket !== null) {
      handler(req, res);
      return;
    }
    const socket = req.socket as TrackedSocket;
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

export interface RunningServer {
  server: http.Server;
  port: number;
  /** Listening sockets on the port: as asked on Linux, one elsewhere (see DEFAULT_LISTEN_SOCKETS). */
  listenSockets: number;
  /** Stops accepting, lets in-flight requests finish (bounded by the timeout), closes every connection. */
  close(timeoutMs: number): Promise<void>;
}

/** Connections the kernel may hold for accept() on each listening socket (capped by net.core.somaxconn). */
const LISTEN_BACKLOG = 4_096;

/**
 * Listening sockets per process by default (LISTEN_SOCKETS). Node (libuv since 1.45) accepts one
 * connection per listening socket per turn of the event loop, and a turn of a busy server reads every
 * connection that has a request waiting: with a thousand busy connections a turn takes tens of
 * milliseconds, so one socket takes in a few dozen connections a second while the rest wait, their
 * requests already sent, in the kernel's accept queue, where no metric of ours sees them. Sockets
 * sharing the port (SO_REUSEPORT; the kernel spreads new connections over them) each take one per
 * turn: 64 take in a burst of 2,000 within seconds. Linux only: elsewhere one socket.
 */
export const DEFAULT_LISTEN_SOCKETS = 64;

/** How long a turn of the event loop may go on before a request asks it to end (see endLongPollPhases). */
const LONG_TURN_MS = 50;

let longTurnCheck: (() => void) | undefined;

/**
 * libuv's poll phase takes up to 1,024 ready sockets from epoll and, when it got that many, polls
 * again at once, up to 48 times, before the loop goes on to its timers, setImmediate callbacks,
 * deferred I/O callbacks (a refused loopback connect is one) and closed handles. A server with more
 * than a thousand connections that each have a request waiting stays in that phase for up to
 * 48 × 1,024 requests, seconds during which none of those ran (its Redis clients, cut off, could not
 * reconnect). The phase ends early when a signal comes in (libuv: "event loop should cycle now"), so a
 * request that finds the loop has not turned for LONG_TURN_MS sends its own process SIGURG (ignored
 * by default, used by nothing else here), at most once per turn. Linux only; no package does this.
 *
 * The turn is timed from the first request of a poll phase, and a setImmediate (the check phase,
 * right after the poll phase) closes it: nothing runs while no request comes. An interval marking
 * the turns instead woke every idle process a hundred times a second (107 context switches a second
 * for an idle products-service, 0.2 without it), work for nothing that takes its core from the
 * processes sharing it.
 */
function endLongPollPhases(): () => void {
  if (longTurnCheck) return longTurnCheck;
  if (process.platform !== 'linux') return (longTurnCheck = () => undefined);
  let turnStartedAt: number | undefined;
  let signalled = false;
  const endTurn = () => {
    turnStartedAt = undefined;
    signalled = false;
  };
  // A listener makes libuv watch the signal (and Node does not keep the process alive for it).
  process.on('SIGURG', () => undefined);
  longTurnCheck = () => {
    if (turnStartedAt === undefined) {
      turnStartedAt = performance.now();
      setImmediate(endTurn);
      return;
    }
    if (signalled || performance.now() - turnStartedAt < LONG_TURN_MS) return;
    signalled = true;
    process.kill(process.pid, 'SIGURG');
  };
  return longTurnCheck;
}

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
async function listenShared(server: http.Server, options: net.ListenOptions, sockets: number): Promise<net.Server[]> {
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

/**
 * Listens with the keep-alive settings on `sockets` listening sockets (see DEFAULT_LISTEN_SOCKETS),
 * answers requests Node's parser rejects and request targets over MAX_REQUEST_TARGET_BYTES with
 * problem+json (closing the connection), and tracks in-flight requests for a graceful close.
 */
export async function listen(
  handler: RequestListener,
  port: number,
  host?: string,
  logger?: Logger,
  sockets = 1,
  requestHeadTimeoutMs = DEFAULT_REQUEST_HEAD_TIMEOUT_MS,
): Promise<RunningServer> {
  const server = http.createServer(
    { keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, headersTimeout: KEEP_ALIVE_TIMEOUT_MS + 1_000, requireHostHeader: false },
    // With tracing on, every request in a server span, the malformed ones too.
    traceRequests(refuseMalformedRequests(inTurn(handler))),
  );
  closeConnectionsWithoutRequest(server, requestHeadTimeoutMs, logger);
  answerClientErrors(server, logger);
  // An Expect other than 100-continue (RFC 9110 §10.1.1): Node's own 417 has no body.
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    headArrived(req.socket);
    refuse(res, new HttpProblem('expectation-failed', `Only Expect: 100-continue is supported, not ${String(req.headers.expect).slice(0, 64)}`));
  });
  const inFlight = new Set<http.ServerResponse>();
  let closing = false;
  const endLongTurn = endLongPollPhases();
  // One listener for every response (no closure per request: see observeRequest in http/observation.ts).
  const forget = function (this: http.ServerResponse) {
    inFlight.delete(this);
    responseDone(this.req.socket);
  };
  // Before the handler, which may have answered by the time a later listener runs (a cache hit is sent at once).
  server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    endLongTurn();
    headArrived(req.socket);
    // During shutdown, every response closes its connection so keep-alive clients reconnect elsewhere.
    if (closing) res.setHeader('Connection', 'close');
    inFlight.add(res);
    responseOwed(res);
    res.on('close', forget);
  });
  // A burst of new connections waits in the kernel's accept queue while the event loop is busy;
  // Node's default backlog (511) drops the rest, and a dropped SYN costs its client 1, 3, 7 s of retries.
  const acceptors = await listenShared(server, { port, host, backlog: LISTEN_BACKLOG }, process.platform === 'linux' ? sockets : 1);
  const bound = (server.address() as AddressInfo).port;
  // Each server's close callback comes once the connections it accepted have closed.
  const closed = (one: net.Server) => new Promise<void>((resolve) => one.close(() => resolve()));
  return {
    server,
    port: bound,
    listenSockets: 1 + acceptors.length,
    close: async (timeoutMs) => {
      closing = true;
      for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
      // The HTTP server tracks every connection, whichever socket accepted it.
      const deadline = setTimeout(() => server.closeAllConnections(), timeoutMs);
      const drained = Promise.all([server, ...acceptors].map(closed));
      server.closeIdleConnections();
      await drained;
      clearTimeout(deadline);
    },
  };
}

/**
 * A process's HTTP server from start to exit: listens on `port` (at `host`: every interface unless
 * given), and on `metrics.port` for its metrics when given, says where (with `details`), and on
 * SIGTERM or SIGINT shuts down in order: readiness turns 503, the servers stop accepting and drain,
 * `release` closes pools and clients, the spans still held are sent, and the process exits 0.
 */
export async function serve(options: {
  name: string;
  handler: RequestListener;
  port: number;
  host?: string;
  /** A second server, for the metrics alone: on a port clients are not given. */
  metrics?: { handler: RequestListener; port: number };
  lifecycle: Lifecycle;
  logger: Logger;
  shutdownTimeoutMs: number;
  release: () => Promise<void>;
  /** LISTEN_SOCKETS: see DEFAULT_LISTEN_SOCKETS. */
  listenSockets: number;
  /** REQUEST_HEAD_TIMEOUT_MS: see closeConnectionsWithoutRequest. */
  requestHeadTimeoutMs: number;
  details?: Record<string, unknown>;
}): Promise<void> {
  const { name, handler, port, host, metrics, logger, listenSockets, requestHeadTimeoutMs, details } = options;
  const running = await listen(handler, port, host, logger, listenSockets, requestHeadTimeoutMs);
  const metricsServer = metrics && (await listen(metrics.handler, metrics.port, host, logger, 1, requestHeadTimeoutMs));
  logger.info(
    { port: running.port, ...(metricsServer && { metricsPort: metricsServer.port }), ...(host && { host }), listenSockets: running.listenSockets, ...details },
    `${name} listening`,
  );
  const servers = metricsServer ? [running, metricsServer] : [running];
  stopOnSignals({ ...options, close: (timeoutMs) => Promise.all(servers.map((server) => server.close(timeoutMs))) });
}

function stopOnSignals(options: {
  close: (timeoutMs: number) => Promise<unknown>;
  lifecycle: Lifecycle;
  logger: Logger;
  shutdownTimeoutMs: number;
  release: () => Promise<void>;
}): void {
  const { close, lifecycle, logger, shutdownTimeoutMs, release } = options;
  const shutdown = async (signal: NodeJS.Signals) => {
    if (lifecycle.shuttingDown) {
      logger.info({ signal }, 'already shutting down: signal ignored');
      return;
    }
    lifecycle.beginShutdown();
    const drained = close(shutdownTimeoutMs); // stops accepting at once
    logger.info({ signal, shutdownTimeoutMs }, 'shutting down: draining in-flight requests');
    let exitCode = 0;
    try {
      await drained;
      await release();
      await flushTelemetry();
      logger.info('shutdown complete');
    } catch (error) {
      logger.error({ err: error }, 'shutdown failed');
      exitCode = 1;
    }
    process.exit(exitCode);
  };
  // `on`, not `once`: a second signal during the drain (Ctrl-C reaches npm, its wrapper and the
  // process alike) must find the shutdown under way, not Node's default, which exits at once.
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}
