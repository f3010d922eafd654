import net from 'node:net';

/**
 * A TCP proxy the test controls: `cut()` drops every connection and refuses new ones (the server
 * behind it looks dead); `restore()` brings it back on the same port. `replyDelayMs` holds back
 * what the server sends (a slow server); `tamper` may change what the client sends; `afterReply`
 * runs after each reply is passed on.
 */
export class TcpProxy {
  #server: net.Server | undefined;
  readonly #sockets = new Set<net.Socket>();
  readonly #clients = new Set<net.Socket>();
  port = 0;
  replyDelayMs = 0;
  tamper: ((sent: Buffer) => Buffer) | undefined;
  /** Runs right after a reply is passed on (e.g. to keep this process's event loop busy). */
  afterReply: (() => void) | undefined;

  // A plain field, not a parameter property: `npm run load` imports this file with Node's type stripping.
  readonly #target: { host: string; port: number };

  constructor(target: { host: string; port: number }) {
    this.#target = target;
  }

  async start(): Promise<this> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.#target);
      this.#clients.add(client);
      client.once('close', () => this.#clients.delete(client));
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.once('close', () => this.#sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      client.on('data', (sent: Buffer) => upstream.write(this.tamper ? this.tamper(sent) : sent));
      upstream.on('data', (reply: Buffer) => {
        if (this.replyDelayMs > 0) setTimeout(() => client.write(reply), this.replyDelayMs);
        else client.write(reply);
        this.afterReply?.();
      });
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', resolve);
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.#server = server;
    return this;
  }

  /** The client connections open now. */
  get clients(): number {
    return this.#clients.size;
  }

  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets) socket.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  async restore(): Promise<void> {
    if (!this.#server) await this.start();
  }

  /** `mysql://…@host:port/…` of `url`, pointed at this proxy. */
  rewrite(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.port);
    return parsed.toString();
  }
}

/** A server that accepts connections and never answers: a hung upstream. */
export async function silentServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A port nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
