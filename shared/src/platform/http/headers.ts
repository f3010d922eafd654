/**
 * The names of the headers the API adds to HTTP's own, spelled once for every process. Responses
 * carry them in this case; a request's `headers` object has them in lower case (`*_FIELD`).
 */

const lowerCase = <Name extends string>(name: Name) => name.toLowerCase() as Lowercase<Name>;

/** The request's id: the caller's when well-formed, echoed on the response and sent to every hop. */
export const REQUEST_ID_HEADER = 'X-Request-Id';
export const REQUEST_ID_FIELD = lowerCase(REQUEST_ID_HEADER);

/** What the gateway's response cache did for a read (`HIT`, `MISS`, `BYPASS`, `STALE`). */
export const CACHE_OUTCOME_HEADER = 'X-Cache';
export const CACHE_OUTCOME_FIELD = lowerCase(CACHE_OUTCOME_HEADER);

/** Makes a write safe to retry (IETF draft-ietf-httpapi-idempotency-key-header). */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
export const IDEMPOTENCY_KEY_FIELD = lowerCase(IDEMPOTENCY_KEY_HEADER);

/** `true` on a response replayed for a retry with the same Idempotency-Key. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/** The caller's budget and what is left of it (IETF draft-ietf-httpapi-ratelimit-headers). */
export const RATE_LIMIT_POLICY_HEADER = 'RateLimit-Policy';
export const RATE_LIMIT_HEADER = 'RateLimit';

export const RETRY_AFTER_HEADER = 'Retry-After';

/** The `Retry-After` header of an answer that asks to be tried again in `seconds`. */
export const retryAfter = (seconds: number): Record<string, string> => ({ [RETRY_AFTER_HEADER]: String(seconds) });
