import net from 'node:net';
import { defaultToken } from './auth.js';

/** A response read off a raw socket: what a client that does not use an HTTP library sees. */
export interface SocketResponse {
  status: number;
  /** Header names in lower case; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** Whether the server closed the connection after this response. */
  closed: boolean;
}

function parseResponse(received: Buffer, closed: boolean): SocketResponse | undefined {
  return parseFirst(received, closed)?.response;
}

/** The first response in `received`, and how many bytes of it that took (interim responses included). */
function parseFirst(received: Buffer, closed: boolean): { response: SocketResponse; length: number } | undefined {
  let raw = received;
  // Interim (1xx) responses come before the final one: skip them.
  while (/^HTTP\/1\.[01] 1\d\d /.test(raw.subarray(0, 13).toString('latin1')) && raw.indexOf('\r\n\r\n') >= 0) raw = raw.subarray(raw.indexOf('\r\n\r\n') + 4);
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine = '', ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  const rest = raw.subarray(end + 4);
  const length = headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
  if (length !== undefined && rest.length < length) return undefined;
  if (length === undefined && headers['transfer-encoding'] === undefined && !closed) return undefined;
  const body = length === undefined ? rest : rest.subarray(0, length);
  return { response: { status: Number(statusLine.split(' ')[1]), headers, body: body.toString('utf8'), closed }, length: received.length - rest.length + body.length };
}

/**
 * Writes `data` to a new connection at once (pipelined requests, say) and reads every response
 * until the server closes the connection; rejects after `timeoutMs`.
 */
export function rawExchangeAll(port: number, data: string | Buffer, options: { timeoutMs?: number } = {}): Promise<SocketResponse[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(data));
    const received: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server did not close the connection within ${options.timeoutMs ?? 5_000} ms`));
    }, options.timeoutMs ?? 5_000);
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      const responses: SocketResponse[] = [];
      let rest = Buffer.concat(received);
      for (let parsed = parseFirst(rest, true); parsed && rest.length > 0; parsed = parseFirst(rest, true)) {
        responses.push(parsed.response);
        rest = rest.subarray(parsed.length);
      }
      resolve(responses);
    });
  });
}

/**
 * Writes `chunks` to a new connection (each after the previous one is flushed; a number is a pause
 * in ms), then reads the first response. Resolves once it is complete and, when the server says
 * `Connection: close`, the server has closed the connection; rejects after `timeoutMs`.
 */
export function rawExchange(port: number, chunks: (string | Buffer | number)[], options: { timeoutMs?: number } = {}): Promise<SocketResponse> {
  const timeoutMs = options.timeoutMs ?? 5_000;
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let settled = false;
    const timer = setTimeout(() => finish(new Error(`no complete response within ${timeoutMs} ms`)), timeoutMs);
    const finish = (error?: Error, response?: SocketResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(response!);
    };
    const check = (closed: boolean) => {
      const response = parseResponse(Buffer.concat(received), closed);
      if (!response) {
        if (closed) finish(new Error(`connection closed without a complete response: ${JSON.stringify(Buffer.concat(received).toString('latin1').slice(0, 200))}`));
        return;
      }
      if (closed || response.headers.connection?.toLowerCase() !== 'close') finish(undefined, response);
    };
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk);
      check(false);
    });
    socket.on('end', () => check(true));
    socket.on('close', () => check(true));
    socket.on('error', () => check(true));
    socket.once('connect', async () => {
      for (const chunk of chunks) {
        if (settled || socket.destroyed) return;
        if (typeof chunk === 'number') await new Promise((r) => setTimeout(r, chunk).unref());
        else await new Promise<void>((r) => socket.write(chunk, () => r()));
      }
    });
  });
}

/** A request as bytes: request line, headers (Host and the test token added), blank line, body. */
export function requestBytes(method: string, target: string, headers: Record<string, string> = {}, body: string | Buffer = ''): Buffer {
  const lines = [
    `${method} ${target} HTTP/1.1`,
    'Host: 127.0.0.1',
    `Authorization: Bearer ${defaultToken}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), Buffer.isBuffer(body) ? body : Buffer.from(body)]);
}

export const portOf = (url: string) => Number(new URL(url).port);

/** Whether a connection to `host`:`port` opens: 127.0.0.2 is this machine too, but a process listening on 127.0.0.1 alone does not take it. */
export function reaches(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Whether nothing listens on `port` any more: a connection to it is refused. */
export function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

/** A connection held open between requests, as a client's keep-alive pool holds one. */
export interface KeptAliveConnection {
  /**
   * Writes `request`, resolves with its response once complete (and, when it says
   * `Connection: close`, once the server has closed the connection); rejects when the connection
   * ends first or nothing complete comes within `timeoutMs`.
   */
  send(request: string | Buffer, timeoutMs?: number): Promise<SocketResponse>;
  /** How it ended: `closed` by the server in order (FIN), else the error's code (`ECONNRESET`, `EPIPE`); and when. */
  ended: Promise<{ how: string; at: number }>;
  destroy(): void;
}

/** Opens a connection to `port` on 127.0.0.1 that a test sends one request at a time on. */
export function keptAliveConnection(port: number): Promise<KeptAliveConnection> {
  const socket = net.connect(port, '127.0.0.1');
  let received: Buffer[] = [];
  let closed = false;
  let errorCode: string | undefined;
  let waiting: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    received.push(chunk);
    waiting?.();
  });
  socket.on('error', (error: NodeJS.ErrnoException) => (errorCode ??= error.code ?? error.message));
  const ended = new Promise<{ how: string; at: number }>((resolve) =>
    socket.once('close', () => {
      closed = true;
      resolve({ how: errorCode ?? 'closed', at: performance.now() });
      waiting?.();
    }),
  );
  const send = (request: string | Buffer, timeoutMs = 5_000) =>
    new Promise<SocketResponse>((resolve, reject) => {
      received = [];
      const timer = setTimeout(() => settle(new Error(`no complete response within ${timeoutMs} ms`)), timeoutMs);
      const settle = (error?: Error, response?: SocketResponse) => {
        waiting = undefined;
        clearTimeout(timer);
        if (error) reject(error);
        else resolve(response!);
      };
      waiting = () => {
        const response = parseResponse(Buffer.concat(received), closed);
        if (response && (closed || response.headers.connection?.toLowerCase() !== 'close')) settle(undefined, response);
        else if (closed) settle(new Error(`connection ended (${errorCode ?? 'closed'}) without a complete response: ${JSON.stringify(Buffer.concat(received).toString('latin1').slice(0, 200))}`));
      };
      if (closed) waiting();
      else socket.write(request);
    });
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve({ send, ended, destroy: () => socket.destroy() }));
    socket.once('error', reject);
  });
}
