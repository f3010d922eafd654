import type { IncomingMessage } from 'node:http';
import { bodyTooLarge, declaresOversizedBody } from '@app/shared/platform/http/bodies';
import { HttpProblem } from '@app/shared/platform/problem';
import { requestBodyTimedOut } from './problems.js';

/** Whether a body is still to come: a declared length above 0, or a chunked one. */
export const hasBody = (req: IncomingMessage): boolean => {
  const declared = req.headers['content-length'];
  return declared === undefined ? req.headers['transfer-encoding'] !== undefined : declared !== '0';
};

/**
 * The gateway's body limit, enforced here and nowhere else in it: the whole request body, in memory
 * (at most `limitBytes`, the service's); a problem when it is larger (413) or has not all arrived
 * within `timeoutMs` (408). The connection must close after either: the rest of the body may still come.
 */
export function receiveBody(req: IncomingMessage, timeoutMs: number, limitBytes: number): Promise<Buffer> {
  if (declaresOversizedBody(req.headers, limitBytes)) return Promise.reject(bodyTooLarge(limitBytes));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (problem: HttpProblem) => {
      clearTimeout(deadline);
      req.removeListener('data', take);
      req.removeListener('end', done);
      reject(problem);
    };
    const take = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) fail(bodyTooLarge(limitBytes));
      else chunks.push(chunk);
    };
    const done = () => {
      clearTimeout(deadline);
      resolve(Buffer.concat(chunks, size));
    };
    const deadline = setTimeout(() => fail(requestBodyTimedOut(timeoutMs)), timeoutMs);
    req.on('data', take);
    req.once('end', done);
    req.once('error', () => fail(new HttpProblem('bad-request', 'The request body could not be read')));
  });
}
