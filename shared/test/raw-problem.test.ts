import { PassThrough } from 'node:stream';
import { text } from 'node:stream/consumers';
import { rawProblemResponse, writeRawProblem } from '@app/shared/platform/http/raw-problem';
import { HttpProblem } from '@app/shared/platform/problem';

describe('rawProblemResponse', () => {
  it("is a problem+json response that closes its connection, with the problem's own header fields", () => {
    const problem = new HttpProblem('method-not-allowed', 'PATCH is not supported here; use GET', { headers: { Allow: 'GET' } });
    const [head, body] = rawProblemResponse(problem, '/api/products', 'request-1').split('\r\n\r\n') as [string, string];
    expect(head.split('\r\n')).toEqual([
      'HTTP/1.1 405 Method Not Allowed',
      'Content-Type: application/problem+json; charset=utf-8',
      `Content-Length: ${body.length}`,
      'X-Request-Id: request-1',
      'X-Content-Type-Options: nosniff',
      'Allow: GET',
      'Connection: close',
    ]);
    expect(JSON.parse(body)).toEqual(problem.toJSON('/api/products'));
  });

  it('gives the length of the body in bytes, not characters', () => {
    const response = rawProblemResponse(new HttpProblem('bad-request', 'café'), '/', 'request-1');
    const body = response.split('\r\n\r\n')[1]!;
    expect(response).toContain(`\r\nContent-Length: ${body.length + 1}\r\n`);
  });
});

describe('writeRawProblem', () => {
  it('writes the response for the instance / unless told, with a request id, and ends the socket', async () => {
    const socket = new PassThrough();
    writeRawProblem(socket, new HttpProblem('request-timeout', 'The request did not arrive in time'));
    const written = await text(socket); // resolves only once the socket has ended
    const requestId = /\r\nX-Request-Id: ([0-9a-f-]{36})\r\n/.exec(written)?.[1];
    expect(written).toBe(rawProblemResponse(new HttpProblem('request-timeout', 'The request did not arrive in time'), '/', requestId ?? 'no request id'));
  });
});
