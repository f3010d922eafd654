/**
 * The ceiling: a bare `node:http` server that answers every request with the bytes products-service
 * answered (body and headers, given in RESPONSE as JSON), without any work. Nothing written in Node
 * on this machine answers faster. Started by `npm run bench`; reads PORT and RESPONSE.
 */
import { serveBare } from './serve.ts';

const { body, headers } = JSON.parse(process.env.RESPONSE!) as { body: string; headers: Record<string, string> };
const bytes = Buffer.from(body);
serveBare((_req, res) => {
  res.writeHead(200, { ...headers, 'content-length': bytes.length });
  res.end(bytes);
});
