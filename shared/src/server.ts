import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestListener } from 'node:http';
import type { Lifecycle } from './http.js';
import type { Logger } from './logger.js';

/**
 * Longer than any client's idle keep-alive (the gateway's agent keeps idle sockets for
 * UPSTREAM_IDLE_SOCKET_MS), so the server never closes a socket a client is about to reuse.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

export interface RunningServer {
  server: http.Server;
  port: number;
  /** Stops accepting, lets in-flight requests finish (bounded by the timeout), closes every connection. */
  close(timeoutMs: number): Promise<void>;
}

export async function listen(handler: RequestListener, port: number, host?: string): Promise<RunningServer> {
  const server = http.createServer({ keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, headersTimeout: KEEP_ALIVE_TIMEOUT_MS + 1_000 }, handler);
  const inFlight = new Set<http.ServerResponse>();
  let closing = false;
  // One listener for every response (no closure per request: see observeRequest in http.ts).
  const forget = function (this: http.ServerResponse) {
    inFlight.delete(this);
  };
  server.on('request', (_req, res: http.ServerResponse) => {
    // During shutdown, every response closes its connection so keep-alive clients reconnect elsewhere.
    if (closing) res.setHeader('Connection', 'close');
    inFlight.add(res);
    res.on('close', forget);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: (timeoutMs) =>
      new Promise<void>((resolve) => {
        closing = true;
        for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
        const deadline = setTimeout(() => server.closeAllConnections(), timeoutMs);
        server.close(() => {
          clearTimeout(deadline);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}

/**
 * A process's HTTP server from start to exit: listens on `port`, says where (with `details`), and
 * on SIGTERM or SIGINT shuts down in order: readiness turns 503, the server stops accepting and
 * drains, `release` closes pools and clients, and the process exits 0.
 */
export async function serve(options: {
  name: string;
  handler: RequestListener;
  port: number;
  lifecycle: Lifecycle;
  logger: Logger;
  shutdownTimeoutMs: number;
  release: () => Promise<void>;
  details?: Record<string, unknown>;
}): Promise<void> {
  const { name, handler, port, logger, details } = options;
  const running = await listen(handler, port);
  logger.info({ port: running.port, ...details }, `${name} listening`);
  stopOnSignals({ ...options, running });
}

function stopOnSignals(options: {
  running: RunningServer;
  lifecycle: Lifecycle;
  logger: Logger;
  shutdownTimeoutMs: number;
  release: () => Promise<void>;
}): void {
  const { running, lifecycle, logger, shutdownTimeoutMs, release } = options;
  const shutdown = async (signal: NodeJS.Signals) => {
    if (lifecycle.shuttingDown) return;
    lifecycle.beginShutdown();
    const drained = running.close(shutdownTimeoutMs); // stops accepting at once
    logger.info({ signal, shutdownTimeoutMs }, 'shutting down: draining in-flight requests');
    let exitCode = 0;
    try {
      await drained;
      await release();
      logger.info('shutdown complete');
    } catch (error) {
      logger.error({ err: error }, 'shutdown failed');
      exitCode = 1;
    }
    process.exit(exitCode);
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}
