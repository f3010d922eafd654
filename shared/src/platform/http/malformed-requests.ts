import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type { RequestListener } from 'node:http';
import { HttpProblem } from '../problem.js';
import { REQUEST_ID_HEADER } from './headers.js';
import { headArrived } from './request-head-deadline.js';
import { writeProblem } from './responses.js';

/** Requests Node's HTTP server parses but no handler should see: each is refused and its connection closed. */

/** The longest request target (path and query) a server takes; a longer one is a 414. */
export const MAX_REQUEST_TARGET_BYTES = 8 * 1024;

/** Answers a request no handler should see with a problem+json, and closes its connection. */
function refuse(res: http.ServerResponse, problem: HttpProblem): void {
  res.setHeader(REQUEST_ID_HEADER, randomUUID());
  res.setHeader('Connection', 'close');
  writeProblem(res, '/', problem);
}

/** How many `Host` header fields a request has (Node keeps only the first in `headers`). */
export function hostFields(rawHeaders: readonly string[]): number {
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
export function refuseMalformedRequests(handler: RequestListener): RequestListener {
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

/** An Expect other than 100-continue (RFC 9110 §10.1.1): Node's own 417 has no body. */
export function refuseUnmetExpectations(server: http.Server): void {
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    headArrived(req.socket);
    refuse(res, new HttpProblem('expectation-failed', `Only Expect: 100-continue is supported, not ${String(req.headers.expect).slice(0, 64)}`));
  });
}
