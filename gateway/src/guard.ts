import type { IncomingHttpHeaders, IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { type FinishedRequest, observeRequest } from '@app/shared/platform/http/observation';
import { writeProblem } from '@app/shared/platform/http/responses';
import type { Logger } from '@app/shared/platform/logger';
import { HttpProblem, problems } from '@app/shared/platform/problem';
import { currentServerSpan } from '@app/shared/telemetry/spans';
import cors from 'cors';
import type { RequestHandler } from 'express';
import proxyaddr from 'proxy-addr';
import type { AccessPolicy } from './auth/policy.js';
import { requestTargets } from './front-door.js';
import { InvalidToken, KeysUnavailable, type Principal, type TokenVerifier } from './auth/tokens.js';
import type { RateLimitOutcome, RateLimits } from './rate-limit.js';
import { SUBJECT_HEADER } from '@app/shared/platform/subject';

const REALM = 'Bearer realm="api"';

export interface GuardSettings {
  /** Verifies bearer tokens; undefined when authentication is off (AUTH_ENABLED=false). */
  tokens: TokenVerifier | undefined;
  /** Request budgets; undefined when rate limiting is off. */
  limits: RateLimits | undefined;
  /** Origins whose browser pages may call the API (CORS); none when empty. */
  corsOrigins: readonly string[];
  /** How many proxies in front of the gateway (e.g. an Ingress) add to X-Forwarded-For and are trusted. */
  trustedProxyHops: number;
  /** Whether the verified subject goes on the request's trace (`enduser.id`): off by default, as it may be personal data. */
  traceSubject?: boolean;
}

const LIMIT_HEADERS = Symbol('rate limit headers');
const CALLER = Symbol('caller');
type LimitedRequest = IncomingMessage & { [LIMIT_HEADERS]?: Record<string, string>; [CALLER]?: string };

/**
 * Who is calling, as the rate limits count it: `sub:<subject>` for a verified caller, else
 * `addr:<address>` when rate limits are on. Undefined for an anonymous caller with them off.
 */
export const callerOf = (req: IncomingMessage): string | undefined => (req as LimitedRequest)[CALLER];

/**
 * The RateLimit headers the guard decided for a request it let through, still to be sent. Kept on
 * the request rather than set on the response: a cache hit writes them in its one `writeHead`
 * with the entry's headers (`sendHeld`), which Node then writes without building a header map;
 * one header set before makes Node merge them all into its map instead (a CPU profile of a warm
 * hit: 4 µs a request). Express sets them on the response first thing (`sendRateLimitHeaders`).
 */
export const rateLimitHeaders = (req: IncomingMessage): Record<string, string> | undefined => (req as LimitedRequest)[LIMIT_HEADERS];

/** Express's first middleware: the RateLimit headers of a request the guard let through, on its response. */
export const sendRateLimitHeaders: RequestHandler = (req, res, next) => {
  const headers = rateLimitHeaders(req);
  if (headers) for (const name in headers) res.setHeader(name, headers[name] as string);
  next();
};

/**
 * `headers` but `name`, as a new object. Not `delete`: V8 turns an object that loses a property into
 * a slow dictionary, and the proxy copies every request's headers (`{ ...req.headers }` in httpxy),
 * which then cost several times as much (a CPU profile of the proxy path: 3 → 13 µs a request).
 */
function without(headers: IncomingHttpHeaders, name: string): IncomingHttpHeaders {
  const kept: IncomingHttpHeaders = {};
  for (const key in headers) if (key !== name) kept[key] = headers[key];
  return kept;
}

/** Whether the guard decides on `req`: every request under `/api`, canonical or not (those are 404s, counted like any). */
function underApi(req: IncomingMessage): boolean {
  const target = requestTargets.get(req);
  // A canonical target is under /api exactly when it names an API resource (front-door.ts).
  if (target) return target.api !== undefined;
  const path = pathOf(req);
  return path === '/api' || path.startsWith('/api/');
}

const pathOf = (req: IncomingMessage) => requestTargets.get(req)?.path ?? (req.url ?? '/').split('?', 1)[0] ?? '/';

/** A request the guard answers itself, and the caller whose budget it counts against (a 403's, known; a 401's, anonymous). */
class Refusal {
  constructor(
    readonly problem: HttpProblem,
    readonly principal?: Principal,
  ) {}
}

/** Who is calling: a verified principal allowed this request, nobody (anonymous, allowed), or a refusal. */
type Authorisation = Principal | undefined | Refusal;

const unauthorized = (detail: string, challenge: string) => new HttpProblem('unauthorized', detail, { headers: { 'WWW-Authenticate': challenge } });
const quoted = (text: string) => `"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
const missingToken = (scope: string) => new Refusal(unauthorized(`This request needs an access token with the ${scope} scope (Authorization: Bearer <token>)`, `${REALM}, scope="${scope}"`));

/**
 * What the gateway decides before anything else looks at a request: CORS (preflights from allowed
 * origins are answered here), who is calling (a bearer token, verified once and then remembered),
 * whether that caller may do this (the route's scope), and whether it is within its budget.
 * Requests that pass go on to `next` (the cache's hot path, then express) with the verified subject
 * in `X-Auth-Subject` and without the token: the services trust the gateway, and a resource is the
 * same for every caller, so the cache serves authorised requests like any other.
 *
 * A request with a remembered token and a budget leased here is decided synchronously, with no
 * closure, promise or refusal made for it: this runs on every cache hit.
 */
export function withGuard(
  next: RequestListener,
  options: GuardSettings & { policy: AccessPolicy; logger: Logger; onFinished?: (request: FinishedRequest) => void },
): RequestListener {
  const { tokens, limits, policy, logger, onFinished, traceSubject = false } = options;
  const hops = options.trustedProxyHops;
  const trustHop = (_address: string, hop: number) => hop < hops;
  const corsHandler =
    options.corsOrigins.length > 0
      ? cors({
          origin: [...options.corsOrigins],
          methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
          allowedHeaders: ['Authorization', 'Content-Type', 'If-Match', 'If-None-Match', 'X-Request-Id'],
          exposedHeaders: ['ETag', 'Location', 'X-Request-Id', 'X-Cache', 'Age', 'Retry-After', 'RateLimit', 'RateLimit-Policy', 'WWW-Authenticate'],
          maxAge: 600,
        })
      : undefined;

  /** The verified caller, with its subject for the services: a refusal when its token lacks the scope. */
  const admit = (req: IncomingMessage, principal: Principal, scope: string | undefined): Principal | Refusal => {
    req.headers[SUBJECT_HEADER] = principal.forwardedSubject;
    (req as LimitedRequest)[CALLER] = principal.caller;
    if (traceSubject) currentServerSpan()?.setAttribute('enduser.id', principal.subject);
    if (scope === undefined || principal.scopes.has(scope)) return principal;
    const problem = new HttpProblem('insufficient-scope', `This request needs the ${scope} scope, which the access token does not grant`, {
      headers: { 'WWW-Authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"` },
    });
    return new Refusal(problem, principal);
  };
  const tokenProblem = (error: unknown): Refusal => {
    if (error instanceof InvalidToken) return new Refusal(unauthorized(error.message, `${REALM}, error="invalid_token", error_description=${quoted(error.message)}`));
    if (error instanceof KeysUnavailable) return new Refusal(problems.unavailable('The keys to verify access tokens are unavailable; try again shortly', error));
    throw error;
  };

  /**
   * Who the caller is and whether it may make this request. Synchronous for a token verified before
   * (the usual case): only a new token waits for jose.
   */
  function authorise(req: IncomingMessage): Authorisation | Promise<Authorisation> {
    if (!tokens) return undefined;
    const scope = policy.requiredScope(req.method ?? 'GET', requestTargets.get(req));
    const header = req.headers.authorization;
    if (header === undefined) return scope === undefined ? undefined : missingToken(scope);
    // The token stops here: the services get the verified subject instead.
    req.headers = without(req.headers, 'authorization');
    const known = tokens.remembered(header);
    if (known) return admit(req, known, scope);
    return tokens.verify(header).then((principal) => {
      if (principal) return admit(req, principal, scope);
      // Not a bearer token: the request is anonymous.
      return scope === undefined ? undefined : missingToken(scope);
    }, tokenProblem);
  }

  /** Takes the request from its caller's budget: the problem to answer with (a 429 when over it), if any. */
  function limit(req: IncomingMessage, res: ServerResponse, authorisation: Authorisation): HttpProblem | undefined | Promise<HttpProblem | undefined> {
    const refusal = authorisation instanceof Refusal ? authorisation : undefined;
    if (!limits) return refusal?.problem;
    const principal = refusal ? refusal.principal : (authorisation as Principal | undefined);
    const method = req.method ?? 'GET';
    const budget = method === 'GET' || method === 'HEAD' || method === 'OPTIONS' ? 'read' : 'write';
    const client = principal ? principal.caller : `addr:${proxyaddr(req, trustHop)}`;
    (req as LimitedRequest)[CALLER] = client;
    const outcome = limits.consume(budget, client);
    if (outcome instanceof Promise) return outcome.then((settled) => limited(req, res, settled, budget, refusal));
    return limited(req, res, outcome, budget, refusal);
  }

  /** Sets the RateLimit headers: kept on the request for a request let through, on the response for one refused. */
  function limited(req: IncomingMessage, res: ServerResponse, outcome: RateLimitOutcome, budget: string, refusal: Refusal | undefined): HttpProblem | undefined {
    if (outcome.allowed && !refusal) {
      (req as LimitedRequest)[LIMIT_HEADERS] = outcome.headers;
      return undefined;
    }
    // The guard answers this one itself.
    if (!outcome.allowed) currentServerSpan()?.setAttribute('gateway.rate_limited', true);
    for (const name in outcome.headers) res.setHeader(name, outcome.headers[name] as string);
    const retryAfter = outcome.headers['Retry-After'];
    if (outcome.allowed || retryAfter === undefined) return refusal?.problem;
    if (outcome.uncounted) {
      return new HttpProblem('service-unavailable', `The ${budget} budget of this client cannot be counted now; retry after ${retryAfter} s`, { headers: { 'Retry-After': retryAfter } });
    }
    return new HttpProblem('rate-limited', `Over the budget of ${budget} requests for this client; retry after ${retryAfter} s`, {
      headers: { 'Retry-After': retryAfter },
    });
  }

  /** The problem to answer `req` with, or undefined when it may go on. */
  function decide(req: IncomingMessage, res: ServerResponse): HttpProblem | undefined | Promise<HttpProblem | undefined> {
    const authorisation = authorise(req);
    return authorisation instanceof Promise ? authorisation.then((settled) => limit(req, res, settled)) : limit(req, res, authorisation);
  }

  const proceed = (req: IncomingMessage, res: ServerResponse, problem: HttpProblem | undefined) => {
    if (!problem) {
      next(req, res);
      return;
    }
    observeRequest(logger, req, res, onFinished);
    writeProblem(res, pathOf(req), problem);
  };
  const fail = (req: IncomingMessage, res: ServerResponse, error: unknown) => {
    const { log } = observeRequest(logger, req, res, onFinished);
    log.error({ err: error }, 'the gateway could not authorise a request');
    writeProblem(res, pathOf(req), new HttpProblem('internal', 'An unexpected error occurred'));
  };

  const guarded: RequestListener = (req, res) => {
    if (!underApi(req)) {
      next(req, res);
      return;
    }
    let decision: ReturnType<typeof decide>;
    try {
      decision = decide(req, res);
    } catch (error) {
      fail(req, res, error);
      return;
    }
    if (decision instanceof Promise) {
      decision.then(
        (problem) => proceed(req, res, problem),
        (error: unknown) => fail(req, res, error),
      );
    } else proceed(req, res, decision);
  };

  const allowedOrigins = new Set(options.corsOrigins);
  /**
   * A preflight from an allowed origin: answered here (204 with the CORS headers), observed and
   * counted against its address's read budget like any request (browsers send no token with it).
   */
  const preflight = (req: IncomingMessage, res: ServerResponse, answer: RequestHandler) => {
    const { log } = observeRequest(logger, req, res, onFinished);
    const answered = (problem: HttpProblem | undefined) => {
      if (problem) {
        writeProblem(res, pathOf(req), problem);
        return;
      }
      const headers = rateLimitHeaders(req);
      if (headers) for (const name in headers) res.setHeader(name, headers[name] as string);
      answer(req as Parameters<RequestHandler>[0], res as Parameters<RequestHandler>[1], () => undefined);
    };
    const failed = (error: unknown) => {
      log.error({ err: error }, 'the gateway could not count a preflight');
      writeProblem(res, pathOf(req), new HttpProblem('internal', 'An unexpected error occurred'));
    };
    try {
      const decision = limit(req, res, undefined);
      if (decision instanceof Promise) decision.then(answered, failed);
      else answered(decision);
    } catch (error) {
      failed(error);
    }
  };

  return (req, res) => {
    // Only the gateway says who the caller is.
    if (req.headers[SUBJECT_HEADER] !== undefined) req.headers = without(req.headers, SUBJECT_HEADER);
    if (!corsHandler) {
      guarded(req, res);
      return;
    }
    if (req.method !== 'OPTIONS') corsHandler(req, res, () => guarded(req, res));
    else if (allowedOrigins.has(req.headers.origin ?? '') && req.headers['access-control-request-method'] !== undefined) preflight(req, res, corsHandler);
    // Any other OPTIONS is a request like any other: auth, limits, 404 or Allow.
    else guarded(req, res);
  };
}
