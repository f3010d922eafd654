import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { type FinishedRequest, observeRequest, writeProblem } from '@app/shared/platform/http';
import type { Logger } from '@app/shared/platform/logger';
import { HttpProblem, problems } from '@app/shared/platform/problem';
import cors from 'cors';
import proxyaddr from 'proxy-addr';
import type { AccessPolicy } from './auth/policy.js';
import { requestTargets } from './front-door.js';
import { InvalidToken, KeysUnavailable, type Principal, type TokenVerifier } from './auth/tokens.js';
import type { RateLimits } from './rate-limit.js';

/** The verified subject, for the services: they trust it because only the gateway can reach them. */
export const SUBJECT_HEADER = 'x-auth-subject';
const REALM = 'Bearer realm="api"';
// RFC 6750: `Bearer` and a b64token.
const BEARER = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i;

export interface GuardSettings {
  /** Verifies bearer tokens; undefined when authentication is off (AUTH_ENABLED=false). */
  tokens: TokenVerifier | undefined;
  /** Request budgets; undefined when rate limiting is off. */
  limits: RateLimits | undefined;
  /** Origins whose browser pages may call the API (CORS); none when empty. */
  corsOrigins: readonly string[];
  /** How many proxies in front of the gateway (e.g. an Ingress) add to X-Forwarded-For and are trusted. */
  trustedProxyHops: number;
}

const underApi = (path: string) => path === '/api' || path.startsWith('/api/');

const unauthorized = (detail: string, challenge: string) => new HttpProblem('unauthorized', detail, { headers: { 'WWW-Authenticate': challenge } });
const quoted = (text: string) => `"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;

/**
 * What the gateway decides before anything else looks at a request: CORS (preflights are answered
 * here), who is calling (a bearer token, verified once and then remembered), whether that caller may
 * do this (the route's scope), and whether it is within its budget. Requests that pass go on to
 * `next` (the cache's hot path, then express) with the verified subject in `X-Auth-Subject` and
 * without the token: the services trust the gateway, and a resource is the same for every caller,
 * so the cache serves authorised requests like any other.
 */
export function withGuard(
  next: RequestListener,
  options: GuardSettings & { policy: AccessPolicy; logger: Logger; onFinished?: (request: FinishedRequest) => void },
): RequestListener {
  const { tokens, limits, policy, logger, onFinished } = options;
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

  /** Who the caller is and whether it may make this request: the problem to answer with, if any. */
  async function authorise(req: IncomingMessage): Promise<{ principal?: Principal; problem?: HttpProblem }> {
    if (!tokens) return {};
    const scope = policy.requiredScope(req.method ?? 'GET', requestTargets.get(req));
    const header = req.headers.authorization;
    // The token stops here: the services get the verified subject instead.
    delete req.headers.authorization;
    const token = header === undefined ? undefined : BEARER.exec(header)?.[1];
    let principal: Principal | undefined;
    if (token !== undefined) {
      try {
        principal = tokens.remembered(token) ?? (await tokens.verify(token));
      } catch (error) {
        if (error instanceof InvalidToken) return { problem: unauthorized(error.message, `${REALM}, error="invalid_token", error_description=${quoted(error.message)}`) };
        if (error instanceof KeysUnavailable) return { problem: problems.unavailable('The keys to verify access tokens are unavailable; try again shortly', error) };
        throw error;
      }
      req.headers[SUBJECT_HEADER] = principal.subject;
    }
    if (scope === undefined) return { principal };
    if (!principal) return { problem: unauthorized(`This request needs an access token with the ${scope} scope (Authorization: Bearer <token>)`, `${REALM}, scope="${scope}"`) };
    if (!principal.scopes.has(scope)) {
      return {
        principal,
        problem: new HttpProblem('insufficient-scope', `This request needs the ${scope} scope, which the access token does not grant`, {
          headers: { 'WWW-Authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"` },
        }),
      };
    }
    return { principal };
  }

  /** The problem to answer `req` with, or undefined when it may go on. Sets the rate limit headers. */
  async function decide(req: IncomingMessage, res: ServerResponse): Promise<HttpProblem | undefined> {
    const { principal, problem } = await authorise(req);
    if (limits) {
      const method = req.method ?? 'GET';
      const budget = method === 'GET' || method === 'HEAD' || method === 'OPTIONS' ? 'read' : 'write';
      const client = principal ? `sub:${principal.subject}` : `addr:${proxyaddr(req, trustHop)}`;
      const outcome = await limits.consume(budget, client);
      for (const [name, value] of Object.entries(outcome.headers)) res.setHeader(name, value);
      const retryAfter = outcome.headers['Retry-After'];
      if (!outcome.allowed && retryAfter !== undefined) {
        return new HttpProblem('rate-limited', `Over the budget of ${budget} requests for this client; retry after ${retryAfter} s`, {
          headers: { 'Retry-After': retryAfter },
        });
      }
    }
    return problem;
  }

  const guarded: RequestListener = (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    if (!underApi(path)) {
      next(req, res);
      return;
    }
    decide(req, res).then(
      (problem) => {
        if (!problem) {
          next(req, res);
          return;
        }
        observeRequest(logger, req, res, onFinished);
        writeProblem(res, path, problem);
      },
      (error: unknown) => {
        const { log } = observeRequest(logger, req, res, onFinished);
        log.error({ err: error }, 'the gateway could not authorise a request');
        writeProblem(res, path, new HttpProblem('internal', 'An unexpected error occurred'));
      },
    );
  };

  return (req, res) => {
    // Only the gateway says who the caller is.
    delete req.headers['x-auth-subject'];
    if (!corsHandler) {
      guarded(req, res);
      return;
    }
    if (req.method === 'OPTIONS' && req.headers.origin !== undefined && req.headers['access-control-request-method'] !== undefined) {
      // A preflight: answered here (204), with the CORS headers only for an allowed origin.
      observeRequest(logger, req, res, onFinished);
    }
    corsHandler(req, res, () => guarded(req, res));
  };
}
