import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { UPSTREAM_IDLE_SOCKET_MS } from '@app/shared/platform/http/connection-budget';
import { kindOf } from './method-kind.js';

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

/** Passive outlier detection (as Envoy's): this many connection failures in a row eject a replica. */
export const CONSECUTIVE_FAILURES_TO_EJECT = 3;
/** An ejected replica is out for this long times the number of times it was ejected in a row (at most MAX_EJECTION_MS). */
export const BASE_EJECTION_MS = 5_000;
const MAX_EJECTION_MS = 60_000;
/** A replica that does not accept a connection within this is a failed one. */
export const CONNECT_TIMEOUT_MS = 2_000;

const keyOf = (endpoint: Endpoint) => `${endpoint.host}:${endpoint.port}`;

/**
 * Which replicas are healthy, from what connecting to them shows (passive outlier detection, as
 * Envoy does it: no probes of our own). A replica that fails CONSECUTIVE_FAILURES_TO_EJECT
 * connections in a row is left out of new connections for a while, longer each time it is ejected
 * again, and comes back by itself when that time is over; one success forgives it. When every replica
 * is ejected, all are used (Envoy's "panic" mode): better a chance than a certain 502.
 * Written here because no npm library does this for a set of replicas: circuit breakers (cockatiel,
 * opossum) guard one call site, they do not choose among endpoints.
 */
export class ReplicaHealth {
  readonly #replicas = new Map<string, { failures: number; ejections: number; ejectedUntil: number }>();
  readonly #turns = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  isEjected(endpoint: Endpoint): boolean {
    return (this.#replicas.get(keyOf(endpoint))?.ejectedUntil ?? 0) > this.now();
  }

  /**
   * The replicas in the order a new connection tries them: each call starts at the next one
   * (so connections spread over all of them), ejected ones last.
   */
  order(service: string, endpoints: Endpoint[]): Endpoint[] {
    const turn = this.#turns.get(service) ?? 0;
    this.#turns.set(service, turn + 1);
    const start = endpoints.length > 0 ? turn % endpoints.length : 0;
    const rotated = [...endpoints.slice(start), ...endpoints.slice(0, start)];
    return [...rotated.filter((e) => !this.isEjected(e)), ...rotated.filter((e) => this.isEjected(e))];
  }

  failed(endpoint: Endpoint): void {
    const replica = this.#replicas.get(keyOf(endpoint)) ?? { failures: 0, ejections: 0, ejectedUntil: 0 };
    replica.failures += 1;
    if (replica.failures >= CONSECUTIVE_FAILURES_TO_EJECT) {
      replica.ejections += 1;
      replica.failures = 0;
      replica.ejectedUntil = this.now() + Math.min(BASE_EJECTION_MS * replica.ejections, MAX_EJECTION_MS);
    }
    this.#replicas.set(keyOf(endpoint), replica);
  }

  succeeded(endpoint: Endpoint): void {
    this.#replicas.delete(keyOf(endpoint));
  }
}

/** A request that may go to another replica when its connection cannot be opened. */
function mayRetry(options: http.ClientRequestArgs): boolean {
  if (kindOf((options.method ?? 'GET').toUpperCase()) === 'read') return true;
  // A write only with an Idempotency-Key: the service makes sure it runs once whatever happens.
  return Object.keys(options.headers ?? {}).some((name) => name.toLowerCase() === 'idempotency-key');
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

/**
 * Keep-alive agent for one upstream (FIFO reuse spreads concurrent requests over open sockets).
 * Each new connection goes to the next healthy replica the service name resolves to; when it cannot
 * be opened, a GET or HEAD (or a write with an Idempotency-Key) tries once more on another replica —
 * nothing was sent, so nothing can run twice — and the failure counts against the replica.
 */
export function upstreamAgent(
  url: string,
  options: { resolve?: ResolveEndpoints; health?: ReplicaHealth; now?: () => number } = {},
): http.Agent {
  const { resolve = resolveByDns, health = new ReplicaHealth(), now = Date.now } = options;
  const settings = { keepAlive: true, timeout: UPSTREAM_IDLE_SOCKET_MS, scheduling: 'fifo' as const };
  const tls = url.startsWith('https:');
  const agent = tls ? new https.Agent(settings) : new http.Agent(settings);
  const open = agent.createConnection.bind(agent);

  const connect = async (request: http.ClientRequestArgs): Promise<Duplex> => {
    const hostname = (request.hostname ?? request.host ?? 'localhost').replace(/^\[(.*)\]$/, '$1');
    const port = Number(request.port ?? (tls ? 443 : 80));
    const endpoints = health.order(`${hostname}:${port}`, await resolve(hostname, port));
    if (endpoints.length === 0) throw Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' });
    const attempts = mayRetry(request) ? endpoints.slice(0, 2) : endpoints.slice(0, 1);
    let lastError: unknown;
    for (const endpoint of attempts) {
      try {
        const target = { ...request, host: endpoint.host, port: endpoint.port, ...(tls ? { servername: (request as https.RequestOptions).servername ?? hostname } : {}) };
        const socket = await connected(() => open(target) as Duplex);
        health.succeeded(endpoint);
        openedAt.set(socket, now());
        return socket;
      } catch (error) {
        health.failed(endpoint);
        lastError = error;
      }
    }
    throw lastError;
  };

  // Asked by the agent each time a socket's request is done, proxied or a cache fill alike: an aged
  // socket is closed instead of kept (the request is done, so nothing is cut).
  const keepSocketAlive = agent.keepSocketAlive.bind(agent);
  agent.keepSocketAlive = (socket) => now() - (openedAt.get(socket) ?? now()) <= UPSTREAM_MAX_SOCKET_AGE_MS && keepSocketAlive(socket);

  agent.createConnection = (request, callback) => {
    connect(request).then(
      (socket) => callback?.(null, socket),
      (error: Error) => callback?.(error, undefined as never),
    );
    return undefined;
  };
  return agent;
}

/** When each socket to a service was opened. */
const openedAt = new WeakMap<Duplex, number>();
