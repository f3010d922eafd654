import { defaultToken } from './auth.js';
import { assertConforms } from './contract.js';

/** A response as a test reads it: status, headers, and the body parsed when it is JSON. */
export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
  body: any;
}

export interface RequestOptions {
  /** Sent as JSON with `Content-Type: application/json` unless headers say otherwise. */
  json?: unknown;
  /** Sent as is. */
  raw?: string | Buffer;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** The bearer token to send: by default one with every scope (auth.ts); null sends none. */
  token?: string | null;
}

/**
 * One request. Every response is checked against the API description (openapi.json): one that
 * departs from it fails the test with a ContractViolation, whatever the test then expects.
 */
export async function request(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
  const token = options.token === undefined ? defaultToken : options.token;
  const headers: Record<string, string> = { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...options.headers };
  let body: string | Buffer | undefined = options.raw;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] ??= 'application/json';
  }
  const url = new URL(path, baseUrl);
  const response = await fetch(url, { method, headers, body, signal: options.signal });
  const text = await response.text();
  assertConforms({ method, url: url.pathname + url.search, status: response.status, headers: response.headers, text });
  const type = response.headers.get('content-type') ?? '';
  return { status: response.status, headers: response.headers, text, body: /json/.test(type) && text ? JSON.parse(text) : undefined };
}

/**
 * Options for the last request before a test stops the process: its connection closes with the
 * response, so the drain does not wait out the idle grace for it (docs/architecture.md#shutdown).
 */
export const CLOSING_CONNECTION: RequestOptions = { headers: { connection: 'close' } };

/** A client bound to one base URL; `defaults.token` replaces the default token (null: none). */
export function client(baseUrl: string, defaults: Pick<RequestOptions, 'token'> = {}) {
  const send = (method: string, path: string, options?: RequestOptions) => request(baseUrl, method, path, { ...defaults, ...options });
  return {
    get: (path: string, options?: RequestOptions) => send('GET', path, options),
    head: (path: string, options?: RequestOptions) => send('HEAD', path, options),
    post: (path: string, json: unknown, options?: RequestOptions) => send('POST', path, { json, ...options }),
    put: (path: string, json: unknown, options?: RequestOptions) => send('PUT', path, { json, ...options }),
    patch: (path: string, json: unknown, options?: RequestOptions) =>
      send('PATCH', path, { json, ...options, headers: { 'content-type': 'application/merge-patch+json', ...options?.headers } }),
    delete: (path: string, options?: RequestOptions) => send('DELETE', path, options),
    send,
  };
}

export type Client = ReturnType<typeof client>;

/** A gateway's metrics, from its metrics port: not part of the API, so not checked against its description. */
export const metricsOf = async (gateway: { metricsUrl: string }): Promise<string> => (await fetch(`${gateway.metricsUrl}/metrics`)).text();

/** Asserts `response` is a problem+json of `status` and returns its body. */
export function expectProblem(response: TestResponse, status: number, type?: string) {
  expect({ status: response.status, contentType: response.headers.get('content-type') }).toEqual({
    status,
    contentType: 'application/problem+json; charset=utf-8',
  });
  expect(response.body).toMatchObject({ status, title: expect.any(String), detail: expect.any(String), instance: expect.any(String) });
  if (type) expect(response.body.type).toBe(`https://problems.example/${type}`);
  expect(response.text).not.toMatch(/at .*\.(js|ts):\d+|SELECT|INSERT|127\.0\.0\.1/);
  return response.body;
}
