import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response, type Router } from 'express';
import type { Logger } from './logger.js';
import { currentServerSpan, logWithin } from '../telemetry/spans.js';
import { HttpProblem, problems, type FieldError } from './problem.js';
import { requestTarget } from './request-target.js';

export const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;
export const BODY_LIMIT = '100kb';
export const BODY_LIMIT_BYTES = 100 * 1024;
/** How deep objects and arrays may nest in a request body: far more than any resource needs. */
export const MAX_JSON_DEPTH = 32;
/** The content codings a request body may have (`Accept-Encoding` of a 415 says so). */
export const ACCEPTED_CONTENT_ENCODING = 'identity';

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

/** The status a request the client went away from is counted and logged with (nginx's "client closed request"). */
export const CLIENT_CLOSED_REQUEST = 499;

const ARRIVED = Symbol('arrived at');
type StampedRequest = IncomingMessage & { [ARRIVED]?: number };

/**
 * Notes that `req` has just arrived (performance.now()), for a server that may wait for something (a
 * Redis round trip, a fill under way) before it observes the request: its duration in the log line
 * and the metrics then counts from here, not from the moment it is observed.
 */
export function stampArrival(req: IncomingMessage): void {
  (req as StampedRequest)[ARRIVED] = performance.now();
}

/** What `observeRequest` keeps about a request until its response is done. */
class RequestObservation {
  #log: Logger | undefined;
  readonly started: number;
  /** The request's server span (tracing on): its line is written when the response closes, outside the request's context. */
  readonly #span = currentServerSpan();

  constructor(
    readonly request: IncomingMessage,
    readonly requestId: string,
    readonly method: string,
    readonly url: string,
    private readonly logger: Logger,
    readonly onFinished: ((request: FinishedRequest) => void) | undefined,
  ) {
    this.started = (request as StampedRequest)[ARRIVED] ?? performance.now();
  }

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
type ObservedResponse = ServerResponse & { [OBSERVATION]?: RequestObservation };

// One listener for every response, its state on the response: a closure per request attached to
// the response kept whole requests alive through young-generation GCs (measured: the heap grew by
// megabytes a second under load, and collections took 30-190 ms instead of 1-3).
function onResponseClose(this: ObservedResponse): void {
  this[OBSERVATION]?.finished(this);
}

/**
 * Assigns the request id, echoes it, and writes one log line when the response is done (or the
 * client went away); `onFinished` sees the same facts (for metrics). Returns the request id and the
 * request's logger (made on first use).
 */
export function observeRequest(
  logger: Logger,
  req: IncomingMessage,
  res: ServerResponse,
  onFinished?: (request: FinishedRequest) => void,
): { readonly requestId: string; readonly log: Logger } {
  const observation = observeResponse(logger, req, res, onFinished);
  res.setHeader('X-Request-Id', observation.requestId);
  return observation;
}

/**
 * `observeRequest` without echoing the request id: for a response written whole with one
 * `writeHead(status, headers)`, which must then carry `X-Request-Id` itself. Node writes such a
 * response without building its header map (no `setHeader` before it).
 */
export function observeResponse(
  logger: Logger,
  req: IncomingMessage,
  res: ServerResponse,
  onFinished?: (request: FinishedRequest) => void,
): { readonly requestId: string; readonly log: Logger } {
  const observation = new RequestObservation(req, requestIdOf(req.headers['x-request-id']), req.method ?? 'GET', req.url ?? '/', logger, onFinished);
  (res as ObservedResponse)[OBSERVATION] = observation;
  res.on('close', onResponseClose);
  return observation;
}

/** The request id and logger `observeRequest` or `observeResponse` gave a response: for code outside express (no `res.locals`). */
export function observationOf(res: ServerResponse): { readonly requestId: string; readonly log: Logger } | undefined {
  return (res as ObservedResponse)[OBSERVATION];
}

/** `res.locals.log`, made on first use; one descriptor for every request (no closure per request). */
const LOCALS_LOG: PropertyDescriptor = {
  get(this: { [OBSERVATION]: RequestObservation }) {
    return this[OBSERVATION].log;
  },
  enumerable: true,
};

/** First middleware of every process: request id, request logger, one log line per request. */
export function requestContext(logger: Logger, onFinished?: (request: FinishedRequest) => void): RequestHandler {
  return (req, res, next) => {
    const observed = observeRequest(logger, req, res, onFinished);
    res.locals.requestId = observed.requestId;
    (res.locals as { [OBSERVATION]?: unknown })[OBSERVATION] = observed;
    Object.defineProperty(res.locals, 'log', LOCALS_LOG);
    next();
  };
}

/** Answers with `problem` (application/problem+json); `instance` is the request's path. */
export function writeProblem(res: ServerResponse, instance: string, problem: HttpProblem): void {
  res.statusCode = problem.status;
  for (const [name, value] of Object.entries(problem.extras.headers ?? {})) res.setHeader(name, value);
  // Every answer to a GET or HEAD says how it may be kept (docs/api.md), a problem too; one that
  // set its own (the health endpoints' no-store) keeps it.
  const method = res.req?.method;
  if ((method === 'GET' || method === 'HEAD') && !res.hasHeader('Cache-Control')) res.setHeader('Cache-Control', 'no-cache');
  const body = JSON.stringify(problem.toJSON(instance));
  res.setHeader('Content-Type', 'application/problem+json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

export function sendProblem(req: Request, res: Response, problem: HttpProblem): void {
  writeProblem(res, req.originalUrl.split('?', 1)[0] ?? '/', problem);
}

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** A JSON response: what express's `res.json` sends, without its content negotiation and conversions. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', JSON_CONTENT_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(json));
  res.end(json);
}

interface BodyParserError extends Error {
  type?: string;
  status?: number;
  expose?: boolean;
}

/** Express's own errors: the router's, and the body parser's by their `type`. */
function expressProblem(error: BodyParserError): HttpProblem | undefined {
  // The router could not percent-decode a path parameter: no resource has such an id.
  if (error.name === 'URIError') return problems.notFound('No resource at this path (it is not valid percent-encoding)');
  switch (error.type) {
    case 'entity.parse.failed':
      return new HttpProblem('malformed-json', 'The request body is not valid JSON');
    case 'entity.too.large':
      return new HttpProblem('payload-too-large', `The request body is larger than ${BODY_LIMIT}`);
    case 'entity.json.invalid':
      return new HttpProblem('malformed-json', error.message);
    case 'charset.unsupported':
      return new HttpProblem('unsupported-media-type', error.message);
    case 'encoding.unsupported':
      return unsupportedEncoding(error.message);
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return problems.validation([{ path: 'body', message: error.message }]);
    default:
      return undefined;
  }
}

/** The problem an error is: HttpProblems as they are, express's own errors by kind, anything else a 500. */
function problemOf(error: unknown): HttpProblem {
  return (
    (error instanceof HttpProblem ? error : undefined) ??
    expressProblem(error as BodyParserError) ??
    new HttpProblem('internal', 'An unexpected error occurred')
  );
}

/**
 * Answers a request that failed with `error`, for handlers that run before express (see
 * `problemHandler`): a 5xx is logged with its cause; when the response has begun, the connection is
 * cut so the client sees the failure.
 */
export function answerFailure(res: ServerResponse, instance: string, error: unknown, log: Logger): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const problem = problemOf(error);
  if (problem.status >= 500) log.error({ err: error, status: problem.status }, problem.detail);
  writeProblem(res, instance, problem);
}

/**
 * The one place that turns errors into problem+json: HttpProblems as they are (infrastructure errors
 * become HttpProblems where they happen, e.g. in Database), express's own errors by kind, anything
 * else a 500 without details.
 */
export function problemHandler(): ErrorRequestHandler {
  return (error: unknown, req, res, next) => {
    if (res.headersSent) {
      // Too late for a problem response: let express cut the connection so the client sees the failure.
      next(error);
      return;
    }
    answerFailure(res, req.originalUrl.split('?', 1)[0] ?? '/', error, res.locals.log);
  };
}

/** The answer to a request target with no canonical form (see request-target.ts). */
export const noCanonicalForm = () => problems.notFound('No resource at this path: it is not in its canonical form');

/** 404 for a request target with no canonical form: the services act only on canonical paths. */
export const canonicalTargetsOnly: RequestHandler = (req, _res, next) => {
  if (requestTarget(req.url) === undefined) throw noCanonicalForm();
  next();
};

export const notFound: RequestHandler = (req) => {
  throw problems.notFound(`No route for ${req.method} ${req.path}`);
};

/** The methods a route that implements `methods` answers: HEAD comes with GET (express runs GET for it). */
export function answeredMethods(methods: readonly string[]): string[] {
  return methods.flatMap((method) => (method === 'GET' ? ['GET', 'HEAD'] : [method]));
}

/** Ends a route: 204 with Allow for OPTIONS, 405 with Allow for any other method. */
export function allowOnly(methods: readonly string[]): RequestHandler {
  const allow = answeredMethods(methods);
  return (req, res) => {
    if (req.method === 'OPTIONS') {
      res.setHeader('Allow', [...allow, 'OPTIONS'].join(', '));
      res.status(204).end();
      return;
    }
    throw problems.methodNotAllowed(req.method, allow);
  };
}

function mediaType(header: string | undefined): string | undefined {
  return header?.split(';', 1)[0]?.trim().toLowerCase();
}

function unsupportedEncoding(detail: string): HttpProblem {
  // RFC 9110 §15.5.16: a 415 caused by a content coding says which codings would have been accepted.
  return new HttpProblem('unsupported-content-encoding', detail, { headers: { 'Accept-Encoding': ACCEPTED_CONTENT_ENCODING } });
}

/** A body-parser `verify` failure: mapped to malformed-json by `expressProblem`. */
const invalidJson = (message: string) => Object.assign(new Error(message), { status: 400, type: 'entity.json.invalid' });

/**
 * Whether objects and arrays in the JSON text `bytes` nest deeper than `limit`: one pass over the
 * bytes, before anything parses or walks the value recursively. No JSON library offers a depth
 * limit, hence this.
 */
export function nestsDeeperThan(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (inString) {
      if (byte === 0x5c) i++; // backslash: the next byte is escaped
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x7b || byte === 0x5b) {
      if (++depth > limit) return true;
    } else if (byte === 0x7d || byte === 0x5d) depth--;
  }
  return false;
}

/** The raw body, checked before it is parsed: UTF-8 only (never replaced by U+FFFD), nesting bounded. */
function checkJsonBytes(_req: IncomingMessage, _res: ServerResponse, body: Buffer): void {
  if (!isUtf8(body)) throw invalidJson('The request body is not valid UTF-8');
  if (nestsDeeperThan(body, MAX_JSON_DEPTH)) throw invalidJson(`The request body nests objects or arrays deeper than ${MAX_JSON_DEPTH} levels`);
}

/** Member names that mean something to JavaScript objects: never a field of this API. */
const FORBIDDEN_MEMBERS = new Set(['__proto__', 'constructor', 'prototype']);

/** Every `__proto__`, `constructor` or `prototype` member in a parsed body, wherever it is (no recursion). */
export function forbiddenMembers(body: unknown): FieldError[] {
  const found: FieldError[] = [];
  const pending: { value: unknown; path: string[] }[] = [{ value: body, path: [] }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { value, path } = next;
    if (typeof value !== 'object' || value === null) continue;
    for (const [key, member] of Object.entries(value)) {
      const at = [...path, key];
      if (!Array.isArray(value) && FORBIDDEN_MEMBERS.has(key)) found.push({ path: at.join('.'), message: 'is not a known field' });
      pending.push({ value: member, path: at });
    }
  }
  return found;
}

/**
 * A body that declares more than BODY_LIMIT is refused at once, before any of it is read (the
 * connection closes: the rest of the body is not wanted). Without this, the body parser would
 * wait for the whole declared body before answering.
 */
export const refuseOversizedBodies: RequestHandler = (req, res, next) => {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > BODY_LIMIT_BYTES) {
    res.setHeader('Connection', 'close');
    throw new HttpProblem('payload-too-large', `The request body is larger than ${BODY_LIMIT}`);
  }
  next();
};

/**
 * Accepts only a JSON body of the given media types (415 otherwise) without a content coding (415
 * with Accept-Encoding), parsed with the size limit, as valid UTF-8, nested at most MAX_JSON_DEPTH
 * levels (400 malformed-json), and without members that name JavaScript object internals (400).
 */
export function jsonBody(mediaTypes: readonly string[] = ['application/json']): RequestHandler[] {
  return [
    (req, _res, next) => {
      const type = mediaType(req.headers['content-type']);
      if (type === undefined || !mediaTypes.includes(type)) {
        throw new HttpProblem(
          'unsupported-media-type',
          `The request body must be ${mediaTypes.join(' or ')}${type ? `, not ${type}` : ''}`,
        );
      }
      const encoding = req.headers['content-encoding']?.trim().toLowerCase();
      if (encoding !== undefined && encoding !== ACCEPTED_CONTENT_ENCODING) {
        throw unsupportedEncoding(`The request body must not be encoded (Content-Encoding: ${ACCEPTED_CONTENT_ENCODING}), not ${encoding.slice(0, 64)}`);
      }
      next();
    },
    refuseOversizedBodies,
    express.json({ type: () => true, limit: BODY_LIMIT, strict: true, inflate: false, verify: checkJsonBytes }),
    (req, _res, next) => {
      const forbidden = forbiddenMembers(req.body);
      if (forbidden.length > 0) throw problems.validation(forbidden);
      next();
    },
  ];
}

/** Tracks readiness: false from the moment shutdown starts. */
export class Lifecycle {
  #shuttingDown = false;
  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }
  beginShutdown(): void {
    this.#shuttingDown = true;
  }
}

/**
 * `/healthz` (liveness: the process runs) and `/readyz` (readiness: not shutting down and the
 * dependency check passes). `unreadyReason` must be quick, must not throw, and returns why the
 * process cannot serve, or undefined when it can.
 */
export function healthRoutes(
  lifecycle: Lifecycle,
  unreadyReason: () => Promise<string | undefined> = async () => undefined,
): Router {
  const router = express.Router();
  router.get('/healthz', (_req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    const reason = lifecycle.shuttingDown ? 'The process is shutting down' : await unreadyReason();
    if (reason === undefined) res.json({ status: 'ready' });
    else sendProblem(req, res, problems.unavailable(reason));
  });
  router.all(['/healthz', '/readyz'], allowOnly(['GET']));
  return router;
}

/** Express settings every process uses. */
export function baseApp(): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false); // ETags are the resource versions, set by the routes
  app.set('query parser', 'simple');
  return app;
}
