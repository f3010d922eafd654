import http from 'node:http';

/**
 * Serves `handler` as every bare reference server of the bench does: on PORT, 127.0.0.1, with a
 * keep-alive timeout longer than wrk's runs; `/healthz` answered first, for the bench's start-up
 * check. On SIGTERM it stops and calls `release` (an agent, a pool).
 */
export function serveBare(handler: http.RequestListener, release?: () => void): void {
  const server = http.createServer((req, res) => {
    if (req.url === '/healthz') {
      res.end('ok');
      return;
    }
    handler(req, res);
  });
  server.keepAliveTimeout = 65_000;
  server.listen(Number(process.env.PORT), '127.0.0.1');
  process.once('SIGTERM', () => {
    server.close();
    server.closeAllConnections();
    release?.();
  });
}
