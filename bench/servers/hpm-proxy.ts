/**
 * http-proxy-middleware alone: a bare `node:http` server whose every request goes through
 * `createProxyMiddleware` to the service, over the same keep-alive agent as the bare proxy's, its
 * plugins ejected, nothing else. What the gateway's proxy hop costs beyond this is the gateway's;
 * what this costs beyond the bare proxy is the library's. Started by `npm run bench`; reads PORT and
 * UPSTREAM_URL.
 */
import http from 'node:http';
import { createProxyMiddleware } from 'http-proxy-middleware';
import { serveBare } from './serve.ts';

const agent = new http.Agent({ keepAlive: true, scheduling: 'fifo' });
const proxy = createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
  target: new URL(process.env.UPSTREAM_URL!),
  agent,
  ejectPlugins: true,
  // The ejected plugins included the one that answers a failed proxy request: without it, one
  // crashes the process.
  on: {
    error: (_error, _req, res) => {
      if (!('writeHead' in res)) return;
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end();
    },
  },
});

serveBare(
  (req, res) => proxy(req, res, () => res.writeHead(502).end()),
  () => agent.destroy(),
);
