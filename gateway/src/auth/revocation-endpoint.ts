import { headers, json, problemResponse, type Endpoint } from '@app/shared/api-description/openapi';
import { problems } from '@app/shared/platform/problem';
import { GATEWAY_ADMIN_SCOPE } from '@app/shared/platform/services';
import { decodeSubject, MAX_SUBJECT_LENGTH, SUBJECT_HEADER, subjectFlaw } from '@app/shared/platform/subject';
import { parseOrThrow } from '@app/shared/platform/validation';
import type { RequestHandler } from 'express';
import { z } from 'zod';
import { ADMIN_PATH } from '../routing/service-routes.js';
import { challenge, INSUFFICIENT_SCOPE, insufficientScope, unauthorized } from './problems.js';
import type { Revocation } from './revocations.js';
import { MAX_TOKEN_ID_LENGTH } from './claims.js';

export const REVOCATIONS_PATH = `${ADMIN_PATH}/revocations`;

const tokenId = z.string().min(1).max(MAX_TOKEN_ID_LENGTH).meta({ description: "The token's id: its `jti`, or the claim AUTH_CLAIMS reads it from (`uti` for Entra ID)." });
const subject = z
  .string()
  .min(1)
  .max(MAX_SUBJECT_LENGTH)
  .superRefine((value, context) => {
    // Its length has its own checks (above), with their own messages.
    const flaw = value === '' || value.length > MAX_SUBJECT_LENGTH ? undefined : subjectFlaw(value);
    if (flaw !== undefined) context.addIssue({ code: 'custom', message: flaw });
  })
  .meta({ description: "The tokens' `sub`: one a token can have (1 to 255 characters, no control character, no white space at either end, Unicode NFC)." });
const time = (description: string) => z.iso.datetime({ offset: true }).optional().meta({ description });

/** One token by its id (and its `exp`, when known), or every token of a subject issued before a time (now, by default). */
const revocationInput = z
  .union([
    z.strictObject({
      tokenId,
      expiresAt: time("The token's `exp` (RFC 3339), when known: the revocation is then kept until it (and the clock tolerance) at least, which covers a token dated in the future too."),
    }),
    z.strictObject({
      subject,
      issuedBefore: time('Tokens issued up to this time (RFC 3339, never later than now; now when left out), and up to the clock tolerance after it, are refused.'),
    }),
  ])
  .meta({ id: 'RevocationInput' });

const revocationOutput = z
  .union([z.strictObject({ tokenId, expiresAt: z.iso.datetime().optional() }), z.strictObject({ subject, issuedBefore: z.iso.datetime() })])
  .meta({ id: 'Revocation' });

/**
 * What the endpoint hands on: it resolves once Redis holds the revocation, with when it was made (ms,
 * by Redis's clock), and rejects when Redis does not hold it.
 */
export type RecordRevocation = (revocation: Revocation) => Promise<number>;

function revocationFrom(input: z.output<typeof revocationInput>): Revocation {
  if ('tokenId' in input) return input.expiresAt === undefined ? { tokenId: input.tokenId } : { tokenId: input.tokenId, expiresAt: Date.parse(input.expiresAt) };
  return input.issuedBefore === undefined ? { subject: input.subject } : { subject: input.subject, issuedBefore: Date.parse(input.issuedBefore) };
}

/** The revocation as recorded: a subject's, until the time it was made at the latest. */
function shown(revocation: Revocation, madeAt: number): z.output<typeof revocationOutput> {
  const iso = (time: number) => new Date(time).toISOString();
  if (!('tokenId' in revocation)) return { subject: revocation.subject, issuedBefore: iso(Math.min(revocation.issuedBefore ?? madeAt, madeAt)) };
  return revocation.expiresAt === undefined ? { tokenId: revocation.tokenId } : { tokenId: revocation.tokenId, expiresAt: iso(revocation.expiresAt) };
}

const unrecorded = (cause: unknown) => problems.unavailable('The revocation could not be recorded (Redis is unavailable); try again shortly', cause);

function handler(record: RecordRevocation): RequestHandler {
  return async (req, res) => {
    const revocation = revocationFrom(parseOrThrow(revocationInput, req.body));
    let madeAt: number;
    try {
      madeAt = await record(revocation);
    } catch (error) {
      throw unrecorded(error);
    }
    const by = decodeSubject(String(req.headers[SUBJECT_HEADER] ?? ''));
    res.locals.log.info({ revocation, by }, 'Token revocation recorded');
    res.status(201).json(shown(revocation, madeAt));
  };
}

/**
 * `POST /admin/revocations`: revokes one token or every token of a subject issued until a time,
 * for every gateway replica within a second (revocations.ts). Only with GATEWAY_ADMIN_SCOPE, checked by
 * the auth stage like an API scope. Without `record` (the gateway checks no tokens) it is only
 * described.
 */
export function revocationEndpoint(record?: RecordRevocation): Endpoint {
  const at = REVOCATIONS_PATH;
  return {
    path: REVOCATIONS_PATH,
    tag: { name: 'administration', description: `The gateway's administration: needs the \`${GATEWAY_ADMIN_SCOPE}\` scope.` },
    operations: {
      POST: {
        operationId: 'createRevocation',
        summary: 'Revoke access tokens',
        description:
          'Revokes one token (by its id: its `jti`, or the claim AUTH_CLAIMS reads it from) or every token of a subject issued before a time (now at the latest), while the gateway checks tokens (404 otherwise). Every gateway replica refuses them within a second, cache hits included, with a 401 (`error="invalid_token"`). A revocation is kept until every token it names has expired; what each kind covers exactly is in the API guide (docs/api.md, "Revoked tokens").',
        security: [{ bearerAuth: [GATEWAY_ADMIN_SCOPE] }],
        requestBody: { required: true, content: json(revocationInput, { subject: 'mallory' }) },
        responses: {
          201: { description: 'Recorded: every replica refuses the tokens within a second.', headers: headers({}), content: json(revocationOutput, { subject: 'mallory', issuedBefore: '2026-11-27T12:00:00.000Z' }) },
          400: problemResponse(400, { problem: problems.validation([{ path: 'tokenId', message: 'Too small: expected string to have >=1 characters' }]), at }),
          401: problemResponse(401, { problem: unauthorized('The access token has been revoked', challenge('error="invalid_token"')), at }, { 'WWW-Authenticate': 'WWWAuthenticate' }),
          403: problemResponse(403, { problem: insufficientScope(GATEWAY_ADMIN_SCOPE), at }, { 'WWW-Authenticate': 'WWWAuthenticate' }, [INSUFFICIENT_SCOPE]),
          503: problemResponse(503, { problem: unrecorded(undefined), at }),
        },
        handlers: record ? [handler(record)] : [],
      },
    },
  };
}
