import type net from 'node:net';
import type { Logger } from '../logger.js';
import { DEFAULT_REQUEST_HEAD_TIMEOUT_MS } from './request-head-deadline.js';

/** MAX_CONNECTIONS by default: open connections a port of a process takes at once. */
export const DEFAULT_MAX_CONNECTIONS = 4_096;

/** REQUEST_BODY_TIMEOUT_MS by default: how long a request's body may take to arrive after its head. */
export const DEFAULT_REQUEST_BODY_TIMEOUT_MS = 30_000;

/**
 * How long a kept-alive connection may stay idle after a response. Longer than any client's idle
 * keep-alive (the gateway's agent keeps idle sockets for UPSTREAM_IDLE_SOCKET_MS), so the server
 * never closes a socket a client is about to reuse.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/**
 * How long the gateway's agent keeps an idle keep-alive socket to a service. Here, not in the
 * gateway, because a draining service waits this long for the gateway to close its idle sockets
 * itself (DRAIN_IDLE_GRACE_MS); short, so that a drain is short.
 */
export const UPSTREAM_IDLE_SOCKET_MS = 4_000;

/** What a connection may take: time for each part of its life, and room (see capConnections). */
export interface ConnectionBudget {
  /**
   * REQUEST_HEAD_TIMEOUT_MS: for each request head from its first byte; for the first also from
   * accept, for a later one from `idleMs` after the response before it.
   */
  headMs: number;
  /** REQUEST_BODY_TIMEOUT_MS: for a request's body, answered or not, on top of its head's. */
  bodyMs: number;
  /** KEEP_ALIVE_TIMEOUT_MS: idle after a response, without a byte; with the next head's, whatever came. */
  idleMs: number;
  /** MAX_CONNECTIONS: open connections on the port. */
  total: number;
  /** MAX_CONNECTIONS_PER_ADDRESS: open connections on the port from one peer address; 0: no cap. */
  perAddress: number;
}

/** Each part's default: its setting's. */
export const DEFAULT_CONNECTION_BUDGET: ConnectionBudget = {
  headMs: DEFAULT_REQUEST_HEAD_TIMEOUT_MS,
  bodyMs: DEFAULT_REQUEST_BODY_TIMEOUT_MS,
  idleMs: KEEP_ALIVE_TIMEOUT_MS,
  total: DEFAULT_MAX_CONNECTIONS,
  perAddress: 0,
};

/** How often at most refusals are logged (with their count). */
const REFUSAL_LOG_INTERVAL_MS = 60_000;

/** The address a counted connection was counted under. */
const COUNTED_ADDRESS = Symbol('address the connection is counted under');
type CountedSocket = net.Socket & { [COUNTED_ADDRESS]?: string };

/**
 * Closes a new connection at once, before it is read, when the port already holds `caps.total`
 * connections, or `caps.perAddress` from the same peer address. Closed, not answered: an answer
 * means reading the request first, and holding a connection to read it is what the caps bound
 * (docs/architecture.md, "Connections"). Returns the server's first `connection` listener after
 * Node's own; the later ones see a refused socket closing, as any other.
 */
export function capConnections(caps: Pick<ConnectionBudget, 'total' | 'perAddress'>, logger: Logger | undefined): (socket: net.Socket) => void {
  let open = 0;
  const byAddress = new Map<string, number>();
  let unlogged = 0;
  let loggedAt = -Infinity;
  const release = function (this: CountedSocket) {
    open--;
    const address = this[COUNTED_ADDRESS];
    if (address === undefined) return;
    const left = (byAddress.get(address) ?? 1) - 1;
    if (left === 0) byAddress.delete(address);
    else byAddress.set(address, left);
  };
  const refuse = (socket: net.Socket, cap: string) => {
    socket.destroy();
    unlogged++;
    if (performance.now() - loggedAt < REFUSAL_LOG_INTERVAL_MS) return;
    logger?.warn({ refused: unlogged, cap, total: caps.total, perAddress: caps.perAddress }, 'refused connections over a cap');
    loggedAt = performance.now();
    unlogged = 0;
  };
  return (socket: CountedSocket) => {
    if (open >= caps.total) {
      refuse(socket, 'MAX_CONNECTIONS');
      return;
    }
    // Undefined once the peer is gone already: nothing to count it under, and it closes by itself.
    const address = caps.perAddress > 0 ? socket.remoteAddress : undefined;
    if (address !== undefined) {
      const fromAddress = byAddress.get(address) ?? 0;
      if (fromAddress >= caps.perAddress) {
        refuse(socket, 'MAX_CONNECTIONS_PER_ADDRESS');
        return;
      }
      byAddress.set(address, fromAddress + 1);
      socket[COUNTED_ADDRESS] = address;
    }
    open++;
    socket.once('close', release);
  };
}
