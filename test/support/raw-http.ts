import http from 'node:http';
import { defaultToken } from './auth.js';

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
  body: any;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

/**
 * One request with the request target exactly as given: no URL parsing on the way (fetch would
 * resolve dot segments and re-encode). Non-ASCII characters go out as their UTF-8 bytes. Like
 * `client()`, it sends the test token with every scope unless `headers` has an Authorization.
 */
export function rawRequest(baseUrl: string, method: string, target: string, options: { json?: unknown; headers?: Record<string, string> } = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  const body = options.json === undefined ? undefined : Buffer.from(JSON.stringify(options.json));
  const headers: Record<string, string | number> = { authorization: `Bearer ${defaultToken}`, ...options.headers };
  if (body) {
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = body.length;
  }
  return new Promise((resolve, reject) => {
    const request = http.request(
      // Node writes the request line as latin1: the UTF-8 bytes of the target, one per character.
      { hostname, port, method, path: Buffer.from(target).toString('latin1'), headers, agent, timeout: 8_000 },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.once('error', reject);
        response.once('end', () => {
          const text = Buffer.concat(chunks).toString();
          const json = /json/.test(response.headers['content-type'] ?? '') && text !== '';
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: json ? JSON.parse(text) : text });
        });
      },
    );
    request.once('timeout', () => request.destroy(new Error(`${method} ${target}: no response`)));
    request.once('error', reject);
    request.end(body);
  });
}
