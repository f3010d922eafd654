import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { retryAfter } from '@app/shared/platform/http/headers';
import { HttpProblem } from '@app/shared/platform/problem';
import { ADMIN_ROLE, ROLE_HEADER, SUBJECT_HEADER } from '@app/shared/platform/subject';
import { currentServerSpan } from '@app/shared/telemetry/spans';
import type { RevocationList } from './revocations.js';
import { KeysUnavailable } from './key-source.js';
import { challenge, insufficientScope, unauthorized } from './problems.js';
import { InvalidToken, type Principal, type TokenVerifier } from './tokens.js';
import type { Exchange } from '../exchange.js';
import type { Stage } from '../pipeline.js';
import { ownEndpointScope } from '../routing/service-routes.js';
import type { ResponseWriter } from '../respond.js';

const quoted = (text: string) => `"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
const missingToken = (scope: string) => unauthorized(`This request needs an access token with the ${scope} scope (Authorization: Bearer <token>)`, challenge(`scope="${scope}"`));

/**
 * `headers` but `name`, as a new object. Not `delete`: V8 turns an object that loses a property into
 * a slow dictionary, and the proxy copies every request's headers (`{ ...req.headers }` in httpxy),
 * which then cost several times as much.
 */
function without(headers: IncomingHttpHeaders, name: string): IncomingHttpHeaders {
  const kept: IncomingHttpHeaders = {};
  for (const key in headers) if (key !== name) kept[key] = headers[key];
  return kept;
}

/** Only the gateway says who the caller is, and whether as an admin: a client's own say is dropped. */
function dropIdentity(req: IncomingMessage): void {
  if (req.headers[SUBJECT_HEADER] !== undefined) req.headers = without(req.headers, SUBJECT_HEADER);
  if (req.headers[ROLE_HEADER] !== undefined) req.headers = without(req.headers, ROLE_HEADER);
}

function tokenProblem(error: unknown): HttpProblem {
  if (error instanceof InvalidToken) return unauthorized(error.message, challenge(`error="invalid_token", error_description=${quoted(error.message)}`));
  if (error instanceof KeysUnavailable) {
    return new HttpProblem('service-unavailable', 'The keys to verify access tokens are unavailable; try again shortly', { headers: retryAfter(error.retryAfterSeconds), cause: error });
  }
  throw error;
}

/**
 * Who is calling and whether they may make this request: a bearer token (verified once, then
 * remembered) and the scope the route needs (routing/service-routes.ts). Two stages: `identify` first, which only
 * decides (the caller, or the refusal), and `enforce` after the rate limits, which answers a refusal:
 * a refused request still counts against its caller's budget. A request that passes goes on with the
 * verified subject in `X-Auth-Subject` (and `X-Auth-Role: admin` with the service's admin scope)
 * and without its token: the services trust the gateway, and decide by them whose records it sees.
 * A remembered token is decided synchronously, with no closure or promise made for it.
 */
export function authStages(options: {
  tokens: TokenVerifier | undefined;
  /** The revoked tokens, checked on every request (a remembered token too). */
  revocations?: RevocationList;
  writer: ResponseWriter;
  traceSubject: boolean;
}): { identify: Stage; enforce: Stage } {
  const { tokens, revocations, writer, traceSubject } = options;

  /** The verified caller, with its subject for the services; a refusal when its token lacks the scope. */
  const admit = (exchange: Exchange, principal: Principal, scope: string | undefined): void => {
    exchange.req.headers[SUBJECT_HEADER] = principal.forwardedSubject;
    exchange.caller = principal.caller;
    if (traceSubject) currentServerSpan()?.setAttribute('enduser.id', principal.subject);
    const admin = exchange.service !== undefined && principal.scopes.has(exchange.service.adminScope);
    if (admin) exchange.req.headers[ROLE_HEADER] = ADMIN_ROLE;
    if (revocations?.refuses(principal)) exchange.refusal = tokenProblem(new InvalidToken('The access token has been revoked'));
    else if (scope !== undefined && !admin && !principal.scopes.has(scope)) exchange.refusal = insufficientScope(scope);
  };
  const anonymous = (exchange: Exchange, scope: string | undefined): false => {
    if (scope !== undefined) exchange.refusal = missingToken(scope);
    return false;
  };

  const identify: Stage = {
    name: 'identify',
    run(exchange) {
      const { req } = exchange;
      dropIdentity(req);
      if (!tokens || exchange.preflight) return false;
      const method = req.method ?? 'GET';
      const scope = exchange.underApi ? exchange.service?.requiredScope(method) : ownEndpointScope(exchange.path, method);
      // The gateway's other endpoints take no token.
      if (!exchange.underApi && scope === undefined) return false;
      const header = req.headers.authorization;
      if (header === undefined) return anonymous(exchange, scope);
      // The token stops here: the services get the verified subject instead.
      req.headers = without(req.headers, 'authorization');
      const known = tokens.remembered(header);
      if (known) {
        admit(exchange, known, scope);
        return false;
      }
      return tokens.verify(header).then(
        (principal) => {
          // Not a bearer token: the request is anonymous.
          if (!principal) return anonymous(exchange, scope);
          admit(exchange, principal, scope);
          return false;
        },
        (error: unknown) => {
          exchange.refusal = tokenProblem(error);
          return false;
        },
      );
    },
  };
  return { identify, enforce: enforceStage(writer) };
}

/** Answers the refusal `identify` decided, once the request has counted against its budget. */
const enforceStage = (writer: ResponseWriter): Stage => ({
  name: 'enforce',
  run(exchange) {
    if (!exchange.refusal) return false;
    writer.problem(exchange, exchange.refusal);
    return true;
  },
});
