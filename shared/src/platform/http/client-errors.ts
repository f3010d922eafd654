import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../logger.js';
import { HttpProblem } from '../problem.js';
import { MAX_REQUEST_TARGET_BYTES } from './malformed-requests.js';
import { writeRawProblem } from './raw-problem.js';
import { headArrived } from './request-head-deadline.js';

/** What Node's HTTP parser reports about a request it cannot take (`clientError`). */
export interface ClientError extends Error {
  code?: string;
  reason?: string;
  rawPacket?: Buffer;
}

/** The request line of what the client sent, when it was complete: `METHOD target HTTP/x.y`. */
function requestLine(rawPacket: Buffer | undefined): string | undefined {
  if (!rawPacket) return undefined;
  const end = rawPacket.indexOf('\r\n');
  return end < 0 ? undefined : rawPacket.subarray(0, end).toString('latin1');
}

/**
 * The problem for a request Node's HTTP server rejects before any handler sees it: header fields
 * over its limit (431) or a request line over it (414), too slow to arrive (408), anything the
 * parser cannot read (400: bad method token, Content-Length with Transfer-Encoding, …).
 */
export function clientErrorProblem(error: ClientError): HttpProblem {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW': {
      const line = requestLine(error.rawPacket);
      if (line === undefined || line.length > MAX_REQUEST_TARGET_BYTES) {
        return new HttpProblem('uri-too-long', `The request target is longer than ${MAX_REQUEST_TARGET_BYTES} bytes`);
      }
      return new HttpProblem('header-fields-too-large', `The request header fields are larger than ${http.maxHeaderSize} bytes`);
    }
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new HttpProblem('request-timeout', 'The request did not arrive in time');
    default:
      return new HttpProblem('bad-request', `The request is not valid HTTP/1.1${error.reason ? `: ${error.reason.replace(/[^\x20-\x7e]/g, '')}` : ''}`);
  }
}

/** The problem's `instance` for a refused request: its path when the request line has a short one, else `/`. */
export function clientErrorInstance(rawPacket: Buffer | undefined): string {
  const target = requestLine(rawPacket)?.split(' ')[1]?.split('?', 1)[0];
  return target?.startsWith('/') && target.length <= 2048 ? target : '/';
}

/**
 * What a connection owes: how many of its requests still have a response to finish, the response
 * to the last request handed to a handler, and a refusal waiting for those responses.
 */
const PENDING = Symbol('responses pending');
const LAST_RESPONSE = Symbol('last response');
const REFUSAL = Symbol('refusal after the pending responses');
type SocketOwingResponses = Duplex & {
  [PENDING]?: number;
  [LAST_RESPONSE]?: http.ServerResponse;
  [REFUSAL]?: () => void;
};

/** A request came on its socket: `res` is to be sent before any refusal of what followed it. */
export function responseOwed(res: http.ServerResponse): void {
  const tracked = res.req.socket as SocketOwingResponses;
  tracked[PENDING] = (tracked[PENDING] ?? 0) + 1;
  tracked[LAST_RESPONSE] = res;
}

/** The response to the last request `socket` handed a handler, done or not. */
export function lastResponseOf(socket: Duplex): http.ServerResponse | undefined {
  return (socket as SocketOwingResponses)[LAST_RESPONSE];
}

/** A response of `socket` is done: the refusal waiting for it goes out once it was the last. */
export function responseDone(socket: Duplex): void {
  const tracked = socket as SocketOwingResponses;
  const pending = (tracked[PENDING] ?? 1) - 1;
  tracked[PENDING] = pending;
  const refusal = tracked[REFUSAL];
  if (pending > 0 || !refusal) return;
  tracked[REFUSAL] = undefined;
  refusal();
}

/**
 * Answers Node's own HTTP errors (`clientError`) with problem+json instead of an empty response.
 * Requests pipelined before the one refused are answered first, in order (a POST that created a
 * resource says so before the 400 that ends the connection): the server calls responseOwed and
 * responseDone for each response.
 */
export function answerClientErrors(server: http.Server, logger: Logger | undefined): void {
  server.on('clientError', (error: ClientError, socket: Duplex) => {
    const tracked = socket as SocketOwingResponses;
    headArrived(socket);
    if (tracked[REFUSAL]) return; // the parser is past the request already refused
    // While the last request's body is incomplete and its response unfinished, the error is that
    // request's own; otherwise it is a later request's, refused once the earlier ones are answered.
    const last = tracked[LAST_RESPONSE];
    const incomplete = last !== undefined && !last.req.complete;
    const ownError = incomplete && !last.writableEnded;
    // A response already under way on this socket cannot be replaced: only cut it. Nor does the
    // body of a request already answered (its rest read to be discarded) get an answer of its own.
    if (error.code === 'ECONNRESET' || !socket.writable || (ownError && last.headersSent) || (incomplete && last.writableEnded)) {
      socket.destroy();
      return;
    }
    const problem = clientErrorProblem(error);
    const instance = clientErrorInstance(error.rawPacket);
    logger?.info({ code: error.code, status: problem.status }, 'request refused by the HTTP parser');
    const refuse = () => {
      if (socket.writable) writeRawProblem(socket, problem, instance);
      else socket.destroy();
    };
    if (!ownError && (tracked[PENDING] ?? 0) > 0) tracked[REFUSAL] = refuse;
    else refuse();
  });
}
