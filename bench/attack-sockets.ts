/**
 * The clients of `npm run bench:attacks` (bench/attacks.ts): HTTP requests timed one by one, a
 * pacer that starts them on a schedule, and held connections fed a byte at a time. Every one goes
 * to 127.0.0.1 only, and every loop is bounded in count and in time.
 */
import http from 'node:http';
import net from 'node:net';
import type { Read } from './attack-stats.ts';

export const HOST = '127.0.0.1';

export interface Request {
  agent: http.Agent;
  port: number;
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs?: number;
}

/** Sends `request` and reads its whole answer (without decoding it): its time and status, `error` when none came. */
export function send({ agent, port, method, path, headers = {}, body, timeoutMs = 30_000 }: Request): Promise<Read> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (status: Read['status']) => resolve({ ms: performance.now() - started, status });
    const request = http.request({ host: HOST, port, method, path, agent, headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) } });
    request.setTimeout(timeoutMs, () => request.destroy(new Error('timed out')));
    request.on('error', () => done('error'));
    request.on('response', (response) => {
      response.on('error', () => done('error'));
      response.on('end', () => done(response.statusCode!));
      response.resume();
    });
    request.end(body);
  });
}

/** A keep-alive agent whose connections come from `localAddress` (a loopback address). */
export const agentFrom = (localAddress: string) => new http.Agent({ keepAlive: true, localAddress } as http.AgentOptions);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/**
 * Starts `start(i)` `perSecond` times a second, whether the ones before have finished or not, for
 * `seconds` or `count` starts, whichever ends first, or until `stopped()`; resolves once every one
 * started has settled, with what they gave. The seconds are the clock's, not the schedule's: a
 * script that falls behind (thousands of sockets to feed) starts fewer, not for longer.
 */
export async function paced<T>(
  schedule: { perSecond: number; seconds: number; count: number; stopped?: () => boolean },
  start: (i: number) => Promise<T>,
  clock: { now(): number } = performance,
): Promise<T[]> {
  const begun = clock.now();
  const end = begun + schedule.seconds * 1000;
  const started: Promise<T>[] = [];
  for (let i = 0; i < schedule.count; i++) {
    const at = begun + (i * 1000) / schedule.perSecond;
    if (at >= end || clock.now() >= end || schedule.stopped?.()) break;
    await sleep(at - clock.now());
    started.push(start(i));
  }
  return Promise.all(started);
}

/** `concurrency` loops of `round(i)`, one round after another, for `seconds` or `rounds` rounds in all. */
export async function looped(schedule: { concurrency: number; seconds: number; rounds: number }, round: (i: number) => Promise<void>): Promise<number> {
  const until = performance.now() + schedule.seconds * 1000;
  let next = 0;
  const loop = async () => {
    while (next < schedule.rounds && performance.now() < until) await round(next++);
  };
  await Promise.all(Array.from({ length: schedule.concurrency }, loop));
  return next;
}

const TICK_MS = 100;

/**
 * Connections held open by feeding each one byte every `trickleMs` (a request head or body that
 * never ends), spread over ticks of 100 ms so that the writes come evenly. Counts how many it held
 * at most, and how many the server closed.
 */
export class Trickler {
  readonly #slots: Set<net.Socket>[];
  readonly #timer: NodeJS.Timeout;
  #tick = 0;
  #added = 0;
  #held = 0;
  peak = 0;
  closedByServer = 0;

  constructor(trickleMs: number, byte: string) {
    this.#slots = Array.from({ length: Math.max(1, Math.round(trickleMs / TICK_MS)) }, () => new Set<net.Socket>());
    this.#timer = setInterval(() => {
      for (const socket of this.#slots[this.#tick++ % this.#slots.length]!) socket.write(byte);
    }, TICK_MS);
  }

  /** Holds `socket` from now on, until the server closes it or `closeAll`. */
  add(socket: net.Socket): void {
    const slot = this.#slots[this.#added++ % this.#slots.length]!;
    slot.add(socket);
    this.peak = Math.max(this.peak, ++this.#held);
    socket.once('close', () => {
      if (!slot.delete(socket)) return;
      this.#held--;
      this.closedByServer++;
    });
  }

  get held(): number {
    return this.#held;
  }

  /** Stops feeding and closes every connection still held. */
  closeAll(): void {
    clearInterval(this.#timer);
    for (const slot of this.#slots) {
      const sockets = [...slot];
      slot.clear();
      for (const socket of sockets) socket.destroy();
    }
    this.#held = 0;
  }
}

/** What opening one connection gave: a socket to hold, a refusal, or no file left for it here. */
export type Opened = net.Socket | 'refused' | 'no file';

/**
 * Opens a connection from `localAddress` to `port` and writes `head`; with `afterAnswer`, waits for
 * the end of the answer's head (up to 5 s) and writes that too. The socket, once given, reads and
 * drops whatever else comes.
 */
export function openConnection(port: number, localAddress: string, head: string, afterAnswer?: string): Promise<Opened> {
  return new Promise((resolve) => {
    let settled = false;
    let received = '';
    const socket = net.connect({ host: HOST, port, localAddress });
    const settle = (result: Opened) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (result !== socket) socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => settle('refused'), 5_000);
    socket.on('error', (error: NodeJS.ErrnoException) => settle(error.code === 'EMFILE' || error.code === 'ENFILE' ? 'no file' : 'refused'));
    socket.on('close', () => settle('refused'));
    socket.on('data', (chunk: Buffer) => {
      if (settled) return;
      received += chunk.toString('latin1');
      if (!received.includes('\r\n\r\n')) return;
      socket.write(afterAnswer!);
      settle(socket);
    });
    socket.once('connect', () => {
      socket.write(head);
      if (afterAnswer === undefined) settle(socket);
    });
  });
}
