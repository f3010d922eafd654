import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { HttpProblem } from '../problem.js';
import { REQUEST_ID_HEADER } from './headers.js';
import { NOSNIFF } from './responses.js';

/**
 * Writing a problem+json straight to a socket: for a request Node's HTTP server refused before it
 * made a response object (`clientError`), or for a connection whose request never came.
 */

/** The bytes of a problem+json response that closes its connection. */
export function rawProblemResponse(problem: HttpProblem, instance: string, requestId: string): string {
  const body = JSON.stringify(problem.toJSON(instance));
  const headers = [
    `HTTP/1.1 ${problem.status} ${http.STATUS_CODES[problem.status] ?? ''}`,
    'Content-Type: application/problem+json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `${REQUEST_ID_HEADER}: ${requestId}`,
    `${NOSNIFF[0]}: ${NOSNIFF[1]}`,
    ...Object.entries(problem.extras.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
    'Connection: close',
  ];
  return `${headers.join('\r\n')}\r\n\r\n${body}`;
}

/** A problem+json response written straight to the socket, which then closes. */
export function writeRawProblem(socket: Duplex, problem: HttpProblem, instance = '/'): void {
  socket.end(rawProblemResponse(problem, instance, randomUUID()));
}
