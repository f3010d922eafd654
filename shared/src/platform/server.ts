import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { RequestListener } from 'node:http';
import { answerClientErrors, lastResponseOf, responseDone, responseOwed } from './http/client-errors.js';
import { responseClosed, watchedClose } from './http/observation.js';
import type { Lifecycle } from './http/lifecycle.js';
import { LISTEN_BACKLOG, listenShared } from './http/listening-sockets.js';
import { refuseMalformedRequests, refuseUnmetExpectations } from './http/malformed-requests.js';
import { capConnections, type ConnectionBudget, DEFAULT_CONNECTION_BUDGET, UPSTREAM_IDLE_SOCKET_MS } from './http/connection-budget.js';
import { closeConnectionsWithoutRequest, headArrived } from './http/request-head-deadline.js';
import { inTurn } from './http/requests-in-turn.js';
import { endLongPollPhases } from './http/turn-ender.js';
import type { Logger } from './logger.js';
import { flushTelemetry, traceRequests } from '../telemetry/spans.js';

/**
 * Node checks its head and request timeouts on an interval (30 s by default), so a deadline is
 * late by up to that: a tenth of the head's budget, at most a second.
 */
const timeoutCheckInterval = (headMs: number) => Math.max(1, Math.min(1_000, Math.floor(headMs / 10)));

/**
 * Node's server with a budget for each part of a connection's life: a head within `headMs` of its
 * first byte (headersTimeout), a whole request, head and body, within `headMs + bodyMs` of its first
 * byte (requestTimeout: also the body of a request answered before its body was read, which Node
 * reads and discards), and an idle connection closed after `idleMs` without a byte.
 *
 * Node starts a connection's first head clock at accept, as closeConnectionsWithoutRequest does, and
 * would answer a connection that sent nothing with a 408: its headersTimeout is two of its checks
 * later, so that the silent close, due first, always runs first.
 */
function createServer(handler: RequestListener, budget: ConnectionBudget): http.Server {
  return http.createServer(
    {
      keepAliveTimeout: budget.idleMs,
      headersTimeout: budget.headMs + 2 * timeoutCheckInterval(budget.headMs),
      requestTimeout: budget.headMs + budget.bodyMs,
      connectionsCheckingInterval: timeoutCheckInterval(budget.headMs),
      requireHostHeader: false,
    },
    // With tracing on, every request in a server span, the malformed ones too.
    traceRequests(refuseMalformedRequests(inTurn(handler))),
  );
}

export interface RunningServer {
  server: http.Server;
  port: number;
  /** Listening sockets on the port: as asked on Linux, one elsewhere (see DEFAULT_LISTEN_SOCKETS). */
  listenSockets: number;
  /**
   * Stops accepting, lets in-flight requests finish (bounded by the timeout), closes every
   * connection: an idle one after `idleGraceMs` (at once by default), in which a request that comes
   * on it is still answered.
   */
  close(timeoutMs: number, idleGraceMs?: number): Promise<void>;
}

/**
 * How long a draining server keeps an idle kept-alive connection open. Closing one at once races a
 * client sending a request on it, which then sees a reset; the gateway closes its idle sockets to a
 * service after UPSTREAM_IDLE_SOCKET_MS itself, and any request it sends meanwhile is answered with
 * `Connection: close`. The margin covers the gateway noticing the response's end late (a busy event
 * loop) and timers firing late.
 */
export const DRAIN_IDLE_GRACE_MS = UPSTREAM_IDLE_SOCKET_MS + 1_000;

/**
 * What a server does for each connection and request beyond the handler: it keeps the open
 * connections, starts the next head's deadline once a connection's last response is done, and once
 * `startClosing` is called marks every response to close its connection, so keep-alive clients
 * reconnect elsewhere.
 */
function trackRequests(server: http.Server, awaitNextHead: (socket: net.Socket) => void) {
  // Connections, not responses: a Set that takes and lets go of an entry per request keeps every
  // request's objects alive past their time (V8 keeps the entries of a Set's outgrown tables for its
  // iterators, and those tables soon sit in the old generation), so garbage collection copied and
  // promoted most of each request. A connection's response is its socket's last one.
  const connections = new Set<net.Socket>();
  const forgetConnection = function (this: net.Socket) {
    connections.delete(this);
  };
  server.on('connection', (socket: net.Socket) => {
    connections.add(socket);
    socket.on('close', forgetConnection);
  });
  let closing = false;
  const endLongTurn = endLongPollPhases();
  // One listener for every response (no closure per request: see observeRequest in http/observation.ts),
  // and the only one: the request's observation is finished from here too (`watchedClose`).
  const forget = function (this: http.ServerResponse) {
    const socket = this.req.socket;
    responseDone(socket);
    // No later request has come on the connection: its next head is due.
    if (lastResponseOf(socket) === this) awaitNextHead(socket);
    responseClosed(this);
  };
  // Before the handler, which may have answered by the time a later listener runs (a cache hit is sent at once).
  server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    endLongTurn();
    headArrived(req.socket);
    if (closing) res.setHeader('Connection', 'close');
    responseOwed(res);
    res.on('close', forget);
    watchedClose(res);
  });
  return {
    startClosing() {
      closing = true;
      // Node sends a connection's responses in order and closes it after the one that says so.
      for (const socket of connections) {
        const res = lastResponseOf(socket);
        if (res && !res.headersSent) res.setHeader('Connection', 'close');
      }
    },
  };
}

/**
 * Closes `server` and its extra `acceptors`: every connection after `timeoutMs`, idle ones after
 * `idleGraceMs`. Each server's close callback comes once the connections it accepted have closed.
 * http.Server's close also closes its idle connections at once (Node 19 and later); net.Server's,
 * which it extends, only stops accepting.
 */
async function closeServers(server: http.Server, acceptors: net.Server[], timeoutMs: number, idleGraceMs: number): Promise<void> {
  const closed = (one: net.Server, keepIdle = false) =>
    new Promise<void>((resolve) => (keepIdle ? net.Server.prototype.close : one.close).call(one, () => resolve()));
  // The HTTP server tracks every connection, whichever socket accepted it.
  const deadline = setTimeout(() => server.closeAllConnections(), timeoutMs);
  const graceOver = setTimeout(() => server.closeIdleConnections(), Math.min(idleGraceMs, timeoutMs));
  await Promise.all([closed(server, idleGraceMs > 0), ...acceptors.map((acceptor) => closed(acceptor))]);
  clearTimeout(deadline);
  clearTimeout(graceOver);
}

/**
 * Listens on `sockets` listening sockets (see DEFAULT_LISTEN_SOCKETS) with a budget for every
 * connection's whole life (`budget`, each part defaulted), answers requests Node's parser rejects
 * and request targets over MAX_REQUEST_TARGET_BYTES with problem+json (closing the connection), and
 * tracks in-flight requests for a graceful close.
 */
export async function listen(
  handler: RequestListener,
  port: number,
  host?: string,
  logger?: Logger,
  sockets = 1,
  budget: Partial<ConnectionBudget> = {},
): Promise<RunningServer> {
  const whole = { ...DEFAULT_CONNECTION_BUDGET, ...budget };
  const server = createServer(handler, whole);
  server.on('connection', capConnections(whole, logger));
  const awaitNextHead = closeConnectionsWithoutRequest(server, { firstMs: whole.headMs, nextMs: whole.idleMs + whole.headMs }, logger);
  answerClientErrors(server, logger);
  refuseUnmetExpectations(server);
  const requests = trackRequests(server, awaitNextHead);
  // A burst of new connections waits in the kernel's accept queue while the event loop is busy;
  // Node's default backlog (511) drops the rest, and a dropped SYN costs its client 1, 3, 7 s of retries.
  const acceptors = await listenShared(server, { port, host, backlog: LISTEN_BACKLOG }, process.platform === 'linux' ? sockets : 1);
  return {
    server,
    port: (server.address() as AddressInfo).port,
    listenSockets: 1 + acceptors.length,
    close: async (timeoutMs, idleGraceMs = 0) => {
      requests.startClosing();
      await closeServers(server, acceptors, timeoutMs, idleGraceMs);
    },
  };
}

/**
 * The metrics port's cap on open connections: its only clients are the operator's scrapers, and
 * every connection held there costs memory the API port's clients need.
 */
export const METRICS_MAX_CONNECTIONS = 64;

/**
 * A process's HTTP server from start to exit: listens on `port` at `host`, and on `metrics.port` at
 * `metrics.host` for its metrics when given, each connection within `connections`, says where (with
 * `details`), and on SIGTERM or SIGINT (from before it binds a port) shuts down in order:
 * readiness turns 503, the servers stop accepting and drain (the API port's idle connections kept
 * for DRAIN_IDLE_GRACE_MS), `release` closes pools and clients, the spans still held are sent, and
 * the process exits 0.
 */
/** The API's server and the metrics' (when asked for), once both listen. */
type Listening = readonly [RunningServer, RunningServer | undefined];

export async function serve(options: {
  name: string;
  handler: RequestListener;
  port: number;
  host: string;
  /** A second server, for the metrics alone: on a port clients are not given. */
  metrics?: { handler: RequestListener; port: number; host: string };
  lifecycle: Lifecycle;
  logger: Logger;
  shutdownTimeoutMs: number;
  release: () => Promise<void>;
  /** LISTEN_SOCKETS: see DEFAULT_LISTEN_SOCKETS. */
  listenSockets: number;
  connections: ConnectionBudget;
  details?: Record<string, unknown>;
}): Promise<void> {
  const { name, handler, port, host, metrics, logger, listenSockets, connections, details } = options;
  // Handled before a port is bound: a signal sent the moment the process is up (an orchestrator
  // stopping it as soon as it answers) would otherwise find Node's default, which exits at once. A
  // signal during start-up waits for the servers to listen; once they do, they stop accepting in the
  // signal's own turn, before its log line says so. The metrics port's idle connections close at
  // once: a scraper keeps its own for longer than any grace would wait, and a scrape lost costs nothing.
  const closeBoth = ([running, metricsServer]: Listening, timeoutMs: number) =>
    Promise.all([running.close(timeoutMs, DRAIN_IDLE_GRACE_MS), metricsServer?.close(timeoutMs)]);
  let listened: Listening | undefined;
  stopOnSignals({ ...options, close: (timeoutMs) => (listened ? closeBoth(listened, timeoutMs) : listening.then((both) => closeBoth(both, timeoutMs))) });
  const listening = (async (): Promise<Listening> => {
    const running = await listen(handler, port, host, logger, listenSockets, connections);
    const metricsBudget = { ...connections, total: Math.min(connections.total, METRICS_MAX_CONNECTIONS) };
    return [running, metrics && (await listen(metrics.handler, metrics.port, metrics.host, logger, 1, metricsBudget))];
  })();
  const [running, metricsServer] = (listened = await listening);
  logger.info(
    { port: running.port, host, ...(metrics && metricsServer && { metricsPort: metricsServer.port, metricsHost: metrics.host }), listenSockets: running.listenSockets, ...details },
    `${name} listening`,
  );
}

/** How long closing pools and clients and sending the last spans may take after the drain's limit. */
export const RELEASE_TIMEOUT_MS = 2_000;

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
    // Bounded as a whole: a pool or client whose server vanished mid-shutdown must not keep the process alive.
    const deadline = shutdownTimeoutMs + RELEASE_TIMEOUT_MS;
    setTimeout(() => {
      logger.error({ afterMs: deadline }, 'shutdown did not finish in time: exiting without it');
      process.exit(1);
    }, deadline).unref();
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
