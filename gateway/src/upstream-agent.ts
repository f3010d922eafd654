import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction, Socket } from 'node:net';

/**
 * How long an idle keep-alive socket to a service is kept. Shorter than the services' server
 * keep-alive timeout (KEEP_ALIVE_TIMEOUT_MS), so the gateway never reuses a socket the service is
 * closing.
 */
export const UPSTREAM_IDLE_SOCKET_MS = 30_000;

/** After this long a socket carries one last request, so new replicas get connections too. */
export const UPSTREAM_MAX_SOCKET_AGE_MS = 30_000;

type Resolve = (hostname: string, callback: (error: Error | null, addresses: dns.LookupAddress[]) => void) => void;

const resolveAll: Resolve = (hostname, callback) => dns.lookup(hostname, { all: true }, callback);

/**
 * A DNS lookup that starts each new connection at the next address of the name. Compose's DNS
 * answers a service name with one address per replica (and getaddrinfo re-sorts them), so without
 * this every connection would go to the same replica. Not cached: replicas come and go.
 */
export function rotatingLookup(resolve: Resolve = resolveAll): LookupFunction {
  const turns = new Map<string, number>();
  return (hostname, options, callback) => {
    resolve(hostname, (error, addresses) => {
      const turn = turns.get(hostname) ?? 0;
      const start = addresses.length > 0 ? turn % addresses.length : 0;
      const rotated = [...addresses.slice(start), ...addresses.slice(0, start)];
      const [first] = rotated;
      if (error || !first) {
        callback(error ?? Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
        return;
      }
      turns.set(hostname, turn + 1);
      if (options.all) callback(null, rotated);
      else callback(null, first.address, first.family);
    });
  };
}

/** Keep-alive agent for one upstream: FIFO reuse spreads concurrent requests over open sockets. */
export function upstreamAgent(url: string, lookup: LookupFunction = rotatingLookup()): http.Agent {
  const options = { keepAlive: true, timeout: UPSTREAM_IDLE_SOCKET_MS, scheduling: 'fifo' as const, lookup };
  return url.startsWith('https:') ? new https.Agent(options) : new http.Agent(options);
}

const firstUse = new WeakMap<Socket, number>();

/** Marks the request as its socket's last once the socket is older than UPSTREAM_MAX_SOCKET_AGE_MS. */
export function retireAgedSocket(request: http.ClientRequest, now = Date.now()): void {
  const { socket } = request;
  if (!socket) return;
  const since = firstUse.get(socket);
  if (since === undefined) firstUse.set(socket, now);
  else if (now - since > UPSTREAM_MAX_SOCKET_AGE_MS) request.setHeader('Connection', 'close');
}
