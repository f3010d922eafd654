/**
 * The same-bytes peer: a bare `node:http` server that answers every request with the gateway's own
 * warm hit, captured byte for byte (status, every header in its order and spelling, the body:
 * RESPONSE as JSON, bench/hit.ts captures it); only Date, Connection and Keep-Alive are Node's.
 * The warm hit over this is what the gateway's handling costs beyond writing its bytes. Started by
 * `npm run bench`; reads PORT and RESPONSE.
 */
import { serveBare } from './serve.ts';

const { status, headers, body } = JSON.parse(process.env.RESPONSE!) as { status: number; headers: string[]; body: string };
const bytes = Buffer.from(body, 'base64');
serveBare((_req, res) => {
  res.writeHead(status, headers);
  res.end(bytes);
});
