import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { UPSTREAM_IDLE_SOCKET_MS } from '@app/shared/platform/http/connection-budget';

/**
 * A socket this old is closed once its request is done, so the service's name is resolved again
 * that often and a new replica gets connections within seconds.
 */
export const UPSTREAM_MAX_SOCKET_AGE_MS = 5_000;

/** One replica of a service: an address and port a connection can be opened to. */
export interface Endpoint {
  host: string;
  port: number;
}

/** The replicas a service's host name and port stand for now. */
export type ResolveEndpoints = (hostname: string, port: number) => Promise<Endpoint[]>;

/**
 * Compose's and Kubernetes' DNS (headless Service) answer a service name with one address per
 * replica. Not cached: replicas come and go.
 */
const resolveByDns: ResolveEndpoints = async (hostname, port) =>
  (await dns.promises.lookup(hostname, { all: true })).map(({ address }) => ({ host: address, port }));

/** An ejected replica is out for this long times the number of times it was ejected in a row (at most MAX_EJECTION_MS). */
export const BASE_EJECTION_MS = 5_000;
const MAX_EJECTION_MS = 60_000;
/** A replica that does not accept a connection within this is a failed one. */
export const CONNECT_TIMEOUT_MS = 2_000;

const keyOf = (endpoint: Endpoint) => `${endpoint.host}:${endpoint.port}`;

/** How often an ejected replica is probed with a connection of its own (nothing sent on it). */
export const PROBE_INTERVAL_MS = 1_000;

/** Whether a replica accepts a connection again: resolves when it does, rejects when it does not. */
export type Probe = (endpoint: Endpoint) => Promise<void>;

/** A TCP connection to the replica, closed at once: accepted, it is back. */
export const probeByConnecting: Probe = async (endpoint) => {
  (await connected(() => net.connect(endpoint.port, endpoint.host))).destroy();
};

/**
 * Which replicas are healthy, from what connecting to them shows (passive outlier detection, as
 * Envoy does it). A replica that refuses a connection, does not accept one in time, or resets one
 * under a request is left out of new connections at once, for a while: longer each time it is
 * ejected again after coming back (failures while it is out add nothing: one death resets every
 * request it had). While it is out, `probe` tries a connection every PROBE_INTERVAL_MS, and the
 * first one it accepts brings it back (a restarted replica serves again within a second, not when
 * its time is over); so does any successful connection, or the end of its time. When every replica
 * is ejected, all are used (Envoy's "panic" mode), the one that failed longest ago first: a
 * replica just stopped is the least likely to answer.
 * Written here because no npm library does this for a set of replicas: circuit breakers (cockatiel,
 * opossum) guard one call site, they do not choose among endpoints.
 */
export class ReplicaHealth {
  readonly #replicas = new Map<string, { ejections: number; ejectedUntil: number; failedAt: number }>();
  readonly #turns = new Map<string, number>();
  readonly #probing = new Set<string>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly probe?: Probe,
  ) {}

  isEjected(endpoint: Endpoint): boolean {
    return (this.#replicas.get(keyOf(endpoint))?.ejectedUntil ?? 0) > this.now();
  }

  /**
   * The replicas in the order a new connection tries them: each call starts at the next one
   * (so connections spread over all of them), ejected ones last, longest failed first.
   */
  order(service: string, endpoints: Endpoint[]): Endpoint[] {
    const turn = this.#turns.get(service) ?? 0;
    this.#turns.set(service, turn + 1);
    const start = endpoints.length > 0 ? turn % endpoints.length : 0;
    const rotated = [...endpoints.slice(start), ...endpoints.slice(0, start)];
    const failedAt = (e: Endpoint) => this.#replicas.get(keyOf(e))?.failedAt ?? 0;
    const ejected = rotated.filter((e) => this.isEjected(e)).sort((a, b) => failedAt(a) - failedAt(b));
    return [...rotated.filter((e) => !this.isEjected(e)), ...ejected];
  }

  failed(endpoint: Endpoint): void {
    if (this.isEjected(endpoint)) return;
    const replica = this.#replicas.get(keyOf(endpoint)) ?? { ejections: 0, ejectedUntil: 0, failedAt: 0 };
    replica.ejections += 1;
    replica.failedAt = this.now();
    replica.ejectedUntil = replica.failedAt + Math.min(BASE_EJECTION_MS * replica.ejections, MAX_EJECTION_MS);
    this.#replicas.set(keyOf(endpoint), replica);
    this.#probeUntilBack(endpoint);
  }

  succeeded(endpoint: Endpoint): void {
    this.#replicas.delete(keyOf(endpoint));
  }

  /** Probes an ejected replica until it accepts a connection (it is back) or its time is over: one probe at a time. */
  #probeUntilBack(endpoint: Endpoint): void {
    const { probe } = this;
    const key = keyOf(endpoint);
    if (probe === undefined || this.#probing.has(key)) return;
    this.#probing.add(key);
    const attempt = () => {
      if (!this.isEjected(endpoint)) {
        this.#probing.delete(key);
        return;
      }
      probe(endpoint).then(
        () => {
          this.#probing.delete(key);
          this.succeeded(endpoint);
        },
        () => setTimeout(attempt, PROBE_INTERVAL_MS).unref(),
      );
    };
    // Unref'd: a probe never keeps a stopping gateway alive.
    setTimeout(attempt, PROBE_INTERVAL_MS).unref();
  }
}

/**
 * Opens a connection with `open`, resolving once it is connected (TLS included). The deadline
 * passes its verdict only after the event loop has read its sockets once more (setImmediate runs
 * after the poll phase), as RedisHealth's does: after a busy stretch of the gateway's own event loop,
 * the timer would otherwise fire before the connection the service accepted in time is seen.
 */
function connected(open: () => Duplex): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const socket = open();
    let settled = false;
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    };
    const late = () => fail(Object.assign(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`), { code: 'ETIMEDOUT' }));
    const timer = setTimeout(() => setImmediate(late), CONNECT_TIMEOUT_MS);
    socket.once('error', fail);
    socket.once(socket instanceof TLSSocket ? 'secureConnect' : 'connect', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('error', fail);
      resolve(socket);
    });
  });
}

/** What the agent knows of each socket it opened: where to, when, and whose health it counts in. */
interface OpenedSocket {
  endpoint: Endpoint;
  openedAt: number;
  health: ReplicaHealth;
}
const openedSockets = new WeakMap<Duplex, OpenedSocket>();

/** The errors of connections that could not be opened: nothing was sent on them. */
const connectFailures = new WeakSet<object>();

/** Whether `error` is a connection that could not be opened (refused, unreachable, not in time): its request was never sent. */
export const isConnectFailure = (error: unknown): boolean => typeof error === 'object' && error !== null && connectFailures.has(error);

/** The replica of a socket the agent opened has reset or closed it under a request: it leaves the rotation. */
export function socketReset(socket: Duplex): void {
  const opened = openedSockets.get(socket);
  opened?.health.failed(opened.endpoint);
}

/**
 * Agent for one upstream. Each new connection goes to the next healthy replica the service name
 * resolves to; one that cannot be opened fails its request (tagged: isConnectFailure, for the
 * retry in service-hop.ts) and counts against the replica. Keep-alive by default (FIFO reuse
 * spreads concurrent requests over open sockets); `fresh` gives each request a connection of its
 * own, closed after it: a retry's, never a pooled one that may be to the same dead replica.
 */
export function upstreamAgent(
  url: string,
  options: { resolve?: ResolveEndpoints; health?: ReplicaHealth; now?: () => number; fresh?: boolean } = {},
): http.Agent {
  const { resolve = resolveByDns, health = new ReplicaHealth(), now = Date.now } = options;
  const settings = options.fresh ? { keepAlive: false } : { keepAlive: true, timeout: UPSTREAM_IDLE_SOCKET_MS, scheduling: 'fifo' as const };
  const tls = url.startsWith('https:');
  const agent = tls ? new https.Agent(settings) : new http.Agent(settings);
  const open = agent.createConnection.bind(agent);

  const connect = async (request: http.ClientRequestArgs): Promise<Duplex> => {
    const hostname = (request.hostname ?? request.host ?? 'localhost').replace(/^\[(.*)\]$/, '$1');
    const port = Number(request.port ?? (tls ? 443 : 80));
    const [endpoint] = health.order(`${hostname}:${port}`, await resolve(hostname, port));
    if (!endpoint) throw Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' });
    try {
      const target = { ...request, host: endpoint.host, port: endpoint.port, ...(tls ? { servername: (request as https.RequestOptions).servername ?? hostname } : {}) };
      const socket = await connected(() => open(target) as Duplex);
      health.succeeded(endpoint);
      openedSockets.set(socket, { endpoint, openedAt: now(), health });
      return socket;
    } catch (error) {
      health.failed(endpoint);
      if (typeof error === 'object' && error !== null) connectFailures.add(error);
      throw error;
    }
  };

  // Asked by the agent each time a socket's request is done, proxied or a cache fill alike: an aged
  // socket is closed instead of kept (the request is done, so nothing is cut).
  const keepSocketAlive = agent.keepSocketAlive.bind(agent);
  agent.keepSocketAlive = (socket) => now() - (openedSockets.get(socket)?.openedAt ?? now()) <= UPSTREAM_MAX_SOCKET_AGE_MS && keepSocketAlive(socket);

  agent.createConnection = (request, callback) => {
    connect(request).then(
      (socket) => callback?.(null, socket),
      (error: Error) => callback?.(error, undefined as never),
    );
    return undefined;
  };
  return agent;
}
