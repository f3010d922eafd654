import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { currentServerSpan, logWithin } from '../../telemetry/spans.js';
import type { Logger } from '../logger.js';
import { REQUEST_ID_FIELD, REQUEST_ID_HEADER } from './headers.js';
import { NOSNIFF } from './responses.js';

/** Who a request is and what became of it: its id, its logger, one log line and `onFinished` when it is done. */

export const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

declare module 'express-serve-static-core' {
  interface Locals {
    requestId: string;
    log: Logger;
  }
}

/** The request id: the caller's when well-formed, a new one otherwise. */
function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();
}

/** What is known of a request once its response is done. */
export interface FinishedRequest {
  /** The request itself, for what was decided about it on its way in (the gateway's route label). */
  request: IncomingMessage;
  method: string;
  path: string;
  status: number;
  seconds: number;
}

/** Told what became of each request, once its response is done (for metrics). */
export type OnFinished = (request: FinishedRequest) => void;

/** What an observed request is known by: its id, and its logger (made on first use). */
export interface ObservedRequest {
  readonly requestId: string;
  readonly log: Logger;
}

/** The status a request the client went away from is counted and logged with (nginx's "client closed request"). */
const CLIENT_CLOSED_REQUEST = 499;

/** What `observeRequest` keeps about a request until its response is done. */
class RequestObservation {
  #log: Logger | undefined;
  readonly started = performance.now();
  /** The request's server span (tracing on): its line is written when the response closes, outside the request's context. */
  readonly #span = currentServerSpan();

  constructor(
    readonly request: IncomingMessage,
    readonly requestId: string,
    readonly method: string,
    readonly url: string,
    private readonly logger: Logger,
    readonly onFinished: OnFinished | undefined,
  ) {}

  /** The request's logger, made on first use: a request that logs nothing never pays for it. */
  get log(): Logger {
    return (this.#log ??= this.logger.child({ requestId: this.requestId }));
  }

  #write(level: 'warn' | 'info', entry: object): void {
    if (level === 'warn') this.log.warn(entry, 'request failed');
    else this.log.info(entry, 'request');
  }

  /**
   * The log line (and `onFinished`) of the response, once it is done or the client went away. A
   * response the client did not wait for is counted as CLIENT_CLOSED_REQUEST, not as the status it
   * was going to have (200 until set).
   */
  finished(res: ServerResponse): void {
    const aborted = !res.writableFinished;
    const status = aborted ? CLIENT_CLOSED_REQUEST : res.statusCode;
    const level = status >= 500 ? 'warn' : 'info';
    const logged = this.logger.isLevelEnabled(level);
    if (!this.onFinished && !logged) return;
    const seconds = (performance.now() - this.started) / 1000;
    const queryStart = this.url.indexOf('?');
    const path = queryStart < 0 ? this.url : this.url.slice(0, queryStart);
    // The request's child logger only when its line is written: making one serialises its bindings.
    if (logged) {
      const entry = {
        method: this.method,
        path,
        status,
        durationMs: Math.round(seconds * 10_000) / 10,
        ...(aborted ? { aborted: true } : {}),
      };
      logWithin(this.#span, this.#write, this, level, entry);
    }
    this.onFinished?.({ request: this.request, method: this.method, path, status, seconds });
  }
}

const OBSERVATION = Symbol('observation');
/** Set on a response whose server calls `responseClosed` from a 'close' listener of its own (platform/server.ts). */
const CLOSE_WATCHED = Symbol('close watched by its server');
type ObservedResponse = ServerResponse & { [OBSERVATION]?: RequestObservation; [CLOSE_WATCHED]?: true };

/**
 * For a server that listens for every response's 'close' itself: `responseClosed` is then called
 * from that listener, and the observation adds none of its own. A second listener would make Node
 * keep an array of listeners for each response, copied at every emit.
 */
export function watchedClose(res: ServerResponse): void {
  (res as ObservedResponse)[CLOSE_WATCHED] = true;
}

/** What the observation does when the response closes, called by the server that watches it (`watchedClose`). */
export function responseClosed(res: ServerResponse): void {
  (res as ObservedResponse)[OBSERVATION]?.finished(res);
}

// One listener for every response, its state on the response: a closure per request attached to
// the response kept whole requests alive through young-generation GCs, so under load the heap grew
// and each collection took many times longer.
function onResponseClose(this: ObservedResponse): void {
  this[OBSERVATION]?.finished(this);
}

/**
 * Assigns the request id, echoes it (with NOSNIFF), and writes one log line when the response is done (or the
 * client went away); `onFinished` sees the same facts (for metrics). Returns the request id and the
 * request's logger (made on first use).
 */
export function observeRequest(logger: Logger, req: IncomingMessage, res: ServerResponse, onFinished?: OnFinished): ObservedRequest {
  const observation = observeResponse(logger, req, res, onFinished);
  res.setHeader(REQUEST_ID_HEADER, observation.requestId);
  res.setHeader(...NOSNIFF);
  return observation;
}

/**
 * `observeRequest` without echoing the request id: for a response written whole with one
 * `writeHead(status, headers)`, which must then carry `X-Request-Id` and NOSNIFF itself. Node writes such a
 * response without building its header map (no `setHeader` before it).
 */
export function observeResponse(logger: Logger, req: IncomingMessage, res: ServerResponse, onFinished?: OnFinished): ObservedRequest {
  const observation = new RequestObservation(req, requestIdOf(req.headers[REQUEST_ID_FIELD]), req.method ?? 'GET', req.url ?? '/', logger, onFinished);
  (res as ObservedResponse)[OBSERVATION] = observation;
  if (!(res as ObservedResponse)[CLOSE_WATCHED]) res.on('close', onResponseClose);
  return observation;
}

/** `res.locals.log`, made on first use; one descriptor for every request (no closure per request). */
const LOCALS_LOG: PropertyDescriptor = {
  get(this: { [OBSERVATION]: RequestObservation }) {
    return this[OBSERVATION].log;
  },
  enumerable: true,
};

/** First middleware of every process: request id, request logger, one log line per request. */
export function requestContext(logger: Logger, onFinished?: OnFinished): RequestHandler {
  return (req, res, next) => {
    observeRequest(logger, req, res, onFinished);
    exposeObservation(req, res, next);
  };
}

/** `res.locals.requestId` and `res.locals.log` of a response observed before express saw it. */
export const exposeObservation: RequestHandler = (_req, res, next) => {
  const observed = (res as ObservedResponse)[OBSERVATION];
  if (observed) {
    res.locals.requestId = observed.requestId;
    (res.locals as { [OBSERVATION]?: unknown })[OBSERVATION] = observed;
    Object.defineProperty(res.locals, 'log', LOCALS_LOG);
  }
  next();
};

