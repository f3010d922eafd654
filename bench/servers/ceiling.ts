/**
 * The ceiling: a bare `node:http` server that answers every request with the bytes products-service
 * answered (body and headers, given in RESPONSE as JSON), without any work. Nothing written in Node
 * on this machine answers faster. Started by `npm run bench`; reads PORT and RESPONSE.
 */
import http from 'node:http';

const { body, headers } = JSON.parse(process.env.RESPONSE!) as { body: string; headers: Record<string, string> };
const bytes = Buffer.from(body);
const server = http.createServer((req, res) => {
  if (req.url === '/healthz') {
    res.end('ok');
    return;
  }
  res.writeHead(200, { ...headers, 'content-length': bytes.length });
  res.end(bytes);
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT), '127.0.0.1');
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
});
