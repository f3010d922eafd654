import http from 'node:http';
import type { AddressInfo } from 'node:net';

const NOT_COPIED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'content-encoding', 'host']);

interface Hold {
  matches: (method: string, path: string) => boolean;
  reached: () => void;
  released: Promise<void>;
}

/**
 * An HTTP proxy in front of a real service that a test steers: it records every request, can hold
 * a response the service already produced until the test releases it (a reader caught between its
 * upstream fetch and its cache store), can answer 503 itself, or stop listening (refused).
 */
export class HoldingProxy {
  readonly requests: { method: string; path: string }[] = [];
  failWith: number | undefined;
  #holds: Hold[] = [];
  #server: http.Server | undefined;
  port = 0;

  constructor(private readonly target: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** How many requests reached the service for `method` and `path` (with its query). */
  count(method: string, path: string): number {
    return this.requests.filter((r) => r.method === method && r.path === path).length;
  }

  /** Holds the next response matching; `reached` resolves once the service has answered it. */
  hold(matches: (method: string, path: string) => boolean): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    this.#holds.push({ matches, reached, released });
    return { reached: reachedPromise, release };
  }

  async start(): Promise<this> {
    const server = http.createServer((req, res) => void this.#handle(req, res));
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.#server = server;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const path = req.url ?? '/';
    this.requests.push({ method, path });
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (this.failWith !== undefined) {
      const problem = { type: 'https://problems.example/service-unavailable', title: 'Service unavailable', status: this.failWith, detail: 'Failing on purpose', instance: path };
      res.writeHead(this.failWith, { 'content-type': 'application/problem+json; charset=utf-8', 'retry-after': '5' }).end(JSON.stringify(problem));
      return;
    }
    const headers = Object.entries(req.headers).filter(([name]) => !NOT_COPIED.has(name)) as [string, string][];
    const response = await fetch(new URL(path, this.target), {
      method,
      headers,
      body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
    });
    const body = Buffer.from(await response.arrayBuffer());
    const hold = this.#holds.find((h) => h.matches(method, path));
    if (hold) {
      this.#holds.splice(this.#holds.indexOf(hold), 1);
      hold.reached();
      await hold.released;
    }
    const copied: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      if (!NOT_COPIED.has(name)) copied[name] = value;
    });
    res.writeHead(response.status, copied).end(body);
  }
}
