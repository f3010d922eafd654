/**
 * The bare Node proxy: `http.request` to the service and `pipe` both ways, over a keep-alive agent
 * (FIFO, as the gateway's), with nothing else (no limits, logging, deadlines, tracing, header
 * filtering). What the gateway adds to a proxied read is measured against this. Started by
 * `npm run bench`; reads PORT and UPSTREAM_URL.
 */
import http from 'node:http';
import { serveBare } from './serve.ts';

const upstream = new URL(process.env.UPSTREAM_URL!);
const agent = new http.Agent({ keepAlive: true, scheduling: 'fifo' });

serveBare(
  (req, res) => {
    const proxied = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    proxied.once('error', () => {
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end();
    });
    req.pipe(proxied);
  },
  () => agent.destroy(),
);
