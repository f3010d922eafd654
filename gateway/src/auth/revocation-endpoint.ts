import { headers, json, problemResponse, type Endpoint } from '@app/shared/api-description/openapi';
import { HttpProblem, problems } from '@app/shared/platform/problem';
import { GATEWAY_ADMIN_SCOPE } from '@app/shared/platform/services';
import { decodeSubject, SUBJECT_HEADER } from '@app/shared/platform/subject';
import { parseOrThrow } from '@app/shared/platform/validation';
import type { RequestHandler } from 'express';
import { z } from 'zod';
import { ADMIN_PATH } from '../routing.js';
import type { Revocation } from './revocations.js';

export const REVOCATIONS_PATH = `${ADMIN_PATH}/revocations`;

const tokenId = z.string().min(1).max(255).meta({ description: "The token's `jti`." });
const subject = z.string().min(1).max(1024).meta({ description: "The tokens' `sub`." });

/** One token by its id, or every token of a subject issued at or before a time (now, by default). */
const revocationInput = z.union([
  z.strictObject({ tokenId }),
  z.strictObject({
    subject,
    issuedBefore: z.iso.datetime({ offset: true }).optional().meta({ description: 'Tokens issued at or before this time (RFC 3339) are refused; now when left out.' }),
  }),
]).meta({ id: 'RevocationInput' });

const revocationOutput = z
  .union([z.strictObject({ tokenId }), z.strictObject({ subject, issuedBefore: z.iso.datetime() })])
  .meta({ id: 'Revocation' });

/** What the endpoint hands on: it resolves once Redis holds the revocation, and rejects when it does not. */
export type RecordRevocation = (revocation: Revocation) => Promise<void>;

const unrecorded = (cause: unknown) => problems.unavailable('The revocation could not be recorded (Redis is unavailable); try again shortly', cause);

function handler(record: RecordRevocation, now: () => number): RequestHandler {
  return async (req, res) => {
    const input = parseOrThrow(revocationInput, req.body);
    const revocation: Revocation = 'tokenId' in input ? input : { subject: input.subject, issuedBefore: input.issuedBefore ? Date.parse(input.issuedBefore) : now() };
    try {
      await record(revocation);
    } catch (error) {
      throw unrecorded(error);
    }
    const by = decodeSubject(String(req.headers[SUBJECT_HEADER] ?? ''));
    res.locals.log.info({ revocation, by }, 'Token revocation recorded');
    const shown = 'tokenId' in revocation ? revocation : { subject: revocation.subject, issuedBefore: new Date(revocation.issuedBefore).toISOString() };
    res.status(201).json(shown);
  };
}

/**
 * `POST /admin/revocations`: revokes one token or every token of a subject issued until a time,
 * for every gateway replica within a second (revocations.ts). Only with GATEWAY_ADMIN_SCOPE, checked by
 * the auth stage like an API scope. Without `record` (the gateway checks no tokens) it is only
 * described.
 */
export function revocationEndpoint(record?: RecordRevocation, now: () => number = Date.now): Endpoint {
  const at = REVOCATIONS_PATH;
  return {
    path: REVOCATIONS_PATH,
    tag: { name: 'administration', description: "The gateway's administration: needs the `gateway:admin` scope." },
    operations: {
      POST: {
        operationId: 'createRevocation',
        summary: 'Revoke access tokens',
        description:
          'Revokes one token (by its `jti`) or every token of a subject issued at or before a time, while the gateway checks tokens (404 otherwise). Every gateway replica refuses them within a second, cache hits included, with a 401 (`error="invalid_token"`). A revocation is kept until every token it names has expired (AUTH_MAX_TOKEN_LIFETIME_SECONDS).',
        security: [{ bearerAuth: [GATEWAY_ADMIN_SCOPE] }],
        requestBody: { required: true, content: json(revocationInput, { subject: 'mallory' }) },
        responses: {
          201: { description: 'Recorded: every replica refuses the tokens within a second.', headers: headers({}), content: json(revocationOutput, { subject: 'mallory', issuedBefore: '2026-11-27T12:00:00.000Z' }) },
          400: problemResponse(400, { problem: problems.validation([{ path: 'tokenId', message: 'Too small: expected string to have >=1 characters' }]), at }),
          401: problemResponse(401, { problem: new HttpProblem('unauthorized', 'The access token has been revoked'), at }, { 'WWW-Authenticate': 'WWWAuthenticate' }),
          403: problemResponse(403, { problem: new HttpProblem('insufficient-scope', `This request needs the ${GATEWAY_ADMIN_SCOPE} scope, which the access token does not grant`), at }, { 'WWW-Authenticate': 'WWWAuthenticate' }, ['insufficient-scope']),
          503: problemResponse(503, { problem: unrecorded(undefined), at }),
        },
        handlers: record ? [handler(record, now)] : [],
      },
    },
  };
}
