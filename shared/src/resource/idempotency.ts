import { createHash } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import stringify from 'safe-stable-stringify';
import { IDEMPOTENCY_KEY_FIELD, IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER, retryAfter } from '../platform/http/headers.js';
import { HttpProblem, problems } from '../platform/problem.js';
import { decodeSubject, SUBJECT_HEADER } from '../platform/subject.js';

/**
 * `Idempotency-Key` (IETF draft-ietf-httpapi-idempotency-key-header) on POST and PATCH. The first
 * request with a key runs; a retry with the same key and the same request (method, path, body) gets
 * the stored response without running again. The key is claimed in its own short transaction (so
 * a second replica sees it in flight: 409), and the response is stored in the same transaction as
 * the write it describes: either both happened or neither, whatever fails in between.
 */

/** 1 to 255 visible ASCII characters. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
export const DEFAULT_IDEMPOTENCY_TTL_SECONDS = 86_400;
/**
 * What one caller's stored responses (a scope: the collection and the subject, or the collection
 * for anonymous callers) may come to before its oldest keys are dropped: 1 MiB, some 3,000 small
 * responses or 50 of the largest.
 */
export const DEFAULT_IDEMPOTENCY_SCOPE_BYTES = 1_048_576;
/**
 * A claimed key counts as in flight for the request's write deadline (WRITE_DEADLINE_MS: no write
 * made for a request commits later) plus this margin for a COMMIT under way. A claim older than that
 * belongs to a request that is over, or to a replica that died mid-request, and may be taken over.
 * Correctness does not depend on it: a write commits only while its claim holds.
 */
export const COMMIT_MARGIN_MS = 1_000;

/** A response as it is stored and replayed. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What identifies a request: the key within its scope, and what the request asked for. */
export interface IdempotentRequest {
  /** The resource collection, and the authenticated subject when the gateway forwards one. */
  scope: string;
  key: string;
  /** SHA-256 of method, path and body (JSON with sorted members). */
  fingerprint: string;
}

export type Claim = { kind: 'claimed'; token: string } | { kind: 'replay'; response: StoredResponse };

/** Where keys are kept: the service's own database (see MySqlIdempotencyStore). */
export interface IdempotencyStore {
  /** How long a claim holds, in seconds rounded up: at most this long is a key in flight. */
  readonly claimSeconds: number;
  /** Claims the key, or returns the stored response; throws the 409 / 422 problems. */
  claim(request: IdempotentRequest): Promise<Claim>;
  /** Runs `work` in the transaction that `complete` takes part in. */
  transaction<T>(work: () => Promise<T>): Promise<T>;
  /** Stores the response if the claim `token` still holds; false when another request took the key over. */
  complete(request: IdempotentRequest, token: string, response: StoredResponse): Promise<boolean>;
  /** Gives the key up after a request that changed nothing, so a retry runs again. */
  release(request: IdempotentRequest, token: string): Promise<void>;
  /** Drops the scope's oldest stored responses beyond its byte budget; how many. */
  trim(request: IdempotentRequest): Promise<number>;
}

export const idempotencyProblems = {
  invalidKey: () => problems.validation([{ path: IDEMPOTENCY_KEY_HEADER, message: 'must be 1 to 255 visible ASCII characters' }]),
  /** `retryAfterSeconds`: until the claim of the request in progress lapses, at the latest. */
  inFlight: (retryAfterSeconds: number) =>
    new HttpProblem('idempotency-in-flight', `A request with this Idempotency-Key is still in progress; retry after ${retryAfterSeconds} s`, {
      headers: retryAfter(retryAfterSeconds),
    }),
  reused: () => new HttpProblem('idempotency-key-reused', 'This Idempotency-Key was used for a different request'),
};

function fingerprintOf(req: Request): string {
  return createHash('sha256')
    .update(`${req.method} ${req.originalUrl}\n`)
    .update(stringify(req.body) ?? 'null')
    .digest('hex');
}

/** The subject the gateway forwards (platform/subject.ts): keys of different subjects never meet. Undefined when none was. */
function subjectOf(req: Request): string | undefined {
  const header = req.headers[SUBJECT_HEADER];
  if (typeof header !== 'string') return undefined;
  const subject = decodeSubject(header);
  if (subject === undefined) throw problems.validation([{ path: 'X-Auth-Subject', message: 'must be percent-encoded UTF-8' }]);
  return subject;
}

function send(res: Response, response: StoredResponse, replayed: boolean): void {
  res.status(response.status);
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  if (replayed) res.setHeader(REPLAYED_HEADER, 'true');
  res.send(response.body);
}

/**
 * A write handler that honours `Idempotency-Key`: `handle` computes the (successful) response, sent
 * as is without a key. With one, the response is stored with the write; a request that fails
 * (`handle` throws) changed nothing, so its key is released and a retry runs again.
 */
export function idempotent(
  store: IdempotencyStore,
  collection: string,
  handle: (req: Request, res: Response) => Promise<StoredResponse>,
): RequestHandler {
  return async (req, res) => {
    const header = req.headers[IDEMPOTENCY_KEY_FIELD];
    if (header === undefined) {
      send(res, await handle(req, res), false);
      return;
    }
    if (typeof header !== 'string' || !IDEMPOTENCY_KEY.test(header)) throw idempotencyProblems.invalidKey();
    const subject = subjectOf(req);
    const request: IdempotentRequest = {
      scope: subject === undefined ? collection : `${collection} ${subject}`,
      key: header,
      fingerprint: fingerprintOf(req),
    };
    const claim = await store.claim(request);
    if (claim.kind === 'replay') {
      send(res, claim.response, true);
      return;
    }
    let response: StoredResponse;
    try {
      response = await store.transaction(async () => {
        const computed = await handle(req, res);
        // Another request took the key over (this one outlived its claim): it holds it for a claim's time at most.
        if (!(await store.complete(request, claim.token, computed))) throw idempotencyProblems.inFlight(store.claimSeconds);
        return computed;
      });
    } catch (error) {
      await store.release(request, claim.token).catch(() => undefined);
      throw error;
    }
    // The write is done either way: a trim that fails is tried again by the scope's next write.
    await store.trim(request).catch((error: unknown) => res.locals.log.warn({ err: error }, 'could not trim the idempotency keys of a scope'));
    send(res, response, false);
  };
}
