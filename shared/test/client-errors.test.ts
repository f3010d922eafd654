import http from 'node:http';
import { clientErrorInstance, clientErrorProblem, type ClientError } from '@app/shared/platform/http/client-errors';
import { MAX_REQUEST_TARGET_BYTES } from '@app/shared/platform/http/malformed-requests';

const parserError = (code: string, details: Partial<ClientError> = {}): ClientError => Object.assign(new Error(code), { code, ...details });
/** What the parser had read of a request: its request line and a header field. */
const packet = (requestLine: string) => Buffer.from(`${requestLine}\r\nHost: example\r\n`, 'latin1');
/** A GET request line of exactly `length` characters. */
const requestLineOf = (length: number) => `GET /${'a'.repeat(length - 'GET / HTTP/1.1'.length)} HTTP/1.1`;

describe('clientErrorProblem', () => {
  it('calls a header overflow with a request line up to MAX_REQUEST_TARGET_BYTES a 431 that names the header limit', () => {
    const problem = clientErrorProblem(parserError('HPE_HEADER_OVERFLOW', { rawPacket: packet(requestLineOf(MAX_REQUEST_TARGET_BYTES)) }));
    expect({ kind: problem.kind, detail: problem.detail }).toEqual({
      kind: 'header-fields-too-large',
      detail: `The request header fields are larger than ${http.maxHeaderSize} bytes`,
    });
  });

  it('calls a header overflow a 414 when the request line is longer than MAX_REQUEST_TARGET_BYTES or never ended', () => {
    const kinds = [packet(requestLineOf(MAX_REQUEST_TARGET_BYTES + 1)), Buffer.from('GET /aaaa', 'latin1'), undefined].map(
      (rawPacket) => clientErrorProblem(parserError('HPE_HEADER_OVERFLOW', { rawPacket })).kind,
    );
    expect(kinds).toEqual(['uri-too-long', 'uri-too-long', 'uri-too-long']);
    expect(clientErrorProblem(parserError('HPE_HEADER_OVERFLOW')).detail).toBe(`The request target is longer than ${MAX_REQUEST_TARGET_BYTES} bytes`);
  });

  it('calls a request that did not arrive in time a 408', () => {
    const problem = clientErrorProblem(parserError('ERR_HTTP_REQUEST_TIMEOUT'));
    expect({ kind: problem.kind, detail: problem.detail }).toEqual({ kind: 'request-timeout', detail: 'The request did not arrive in time' });
  });

  it("calls anything else a 400 that gives the parser's reason in printable ASCII only", () => {
    const withReason = clientErrorProblem(parserError('HPE_INVALID_METHOD', { reason: 'Invalid method ~\x00\x1f\x7f\u00e9encountered' }));
    expect({ kind: withReason.kind, detail: withReason.detail }).toEqual({
      kind: 'bad-request',
      detail: 'The request is not valid HTTP/1.1: Invalid method ~encountered',
    });
    expect(clientErrorProblem(parserError('HPE_UNEXPECTED_CONTENT_LENGTH')).detail).toBe('The request is not valid HTTP/1.1');
    expect(clientErrorProblem(parserError('HPE_INVALID_METHOD', { reason: '' })).detail).toBe('The request is not valid HTTP/1.1');
  });
});

describe('clientErrorInstance', () => {
  it('is the path of the refused request, without its query', () => {
    expect(clientErrorInstance(packet('POST /api/products?limit=1 HTTP/1.1'))).toBe('/api/products');
    expect(clientErrorInstance(packet(`GET /${'a'.repeat(2047)} HTTP/1.1`))).toBe(`/${'a'.repeat(2047)}`);
  });

  it('is / when the target is no path, is longer than 2048 characters, or the request line never ended', () => {
    const instances = [
      packet('GET http://gateway/api/products HTTP/1.1'),
      packet(`GET /${'a'.repeat(2048)} HTTP/1.1`),
      packet('GET'),
      Buffer.from('GET /api/products', 'latin1'),
      undefined,
    ].map(clientErrorInstance);
    expect(instances).toEqual(['/', '/', '/', '/', '/']);
  });
});
