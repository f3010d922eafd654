import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { HttpProblem } from '@app/shared/platform/problem';
import { receiveBody } from '../../src/proxy/request-body.js';

/** The gateway receives a request body within the limit it is given (its service's), and names that limit in its 413. */
const KIB = 1024;

/** A request whose body arrives in `chunks`, declaring its length unless `chunked`. */
function request(chunks: Buffer[], chunked = false): IncomingMessage {
  const length = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
  const headers = chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(length) };
  return Object.assign(Readable.from(chunks), { headers }) as unknown as IncomingMessage;
}

const bytes = (count: number) => Buffer.alloc(count, 0x61);

describe('receiveBody', () => {
  it('takes a body over the default 100 KiB when the limit given is larger', async () => {
    const body = await receiveBody(request([bytes(100 * KIB), bytes(50 * KIB)]), 1_000, 256 * KIB);
    expect(body.length).toBe(150 * KIB);
  });

  it('refuses a declared length over the limit given, before reading it, naming that limit', async () => {
    const refused = receiveBody(request([bytes(2 * KIB)]), 1_000, KIB);
    await expect(refused).rejects.toBeInstanceOf(HttpProblem);
    await expect(refused).rejects.toMatchObject({ status: 413, detail: 'The request body is larger than 1kb' });
  });

  it('refuses a chunked body once it grows past the limit given', async () => {
    const refused = receiveBody(request([bytes(60 * KIB), bytes(60 * KIB)], true), 1_000, 100 * KIB);
    await expect(refused).rejects.toMatchObject({ status: 413, detail: 'The request body is larger than 100kb' });
  });

  it('names a limit that is no whole number of KiB in bytes', async () => {
    await expect(receiveBody(request([bytes(1_501)], true), 1_000, 1_500)).rejects.toMatchObject({ status: 413, detail: 'The request body is larger than 1500b' });
  });
});
