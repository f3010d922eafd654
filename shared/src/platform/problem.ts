import { retryAfter } from './http/headers.js';

/**
 * The one error model (RFC 9457 problem details). Anything that should reach a client as a 4xx/5xx
 * is an HttpProblem; everything else becomes a 500 without details in `problemHandler`.
 */

export interface FieldError {
  path: string;
  message: string;
}

export const PROBLEM_BASE = 'https://problems.example/';

/** The built-in problem types: those the services raise (the gateway's own refusals are its features', added from their folders). */
const builtInProblemTypes = {
  'validation': { status: 400, title: 'Request validation failed' },
  'malformed-json': { status: 400, title: 'Malformed JSON body' },
  'bad-request': { status: 400, title: 'Malformed HTTP request' },
  'not-owner': { status: 403, title: 'Not the owner of the resource' },
  'not-found': { status: 404, title: 'Resource not found' },
  'method-not-allowed': { status: 405, title: 'Method not allowed' },
  'request-timeout': { status: 408, title: 'Request body timed out' },
  'conflict': { status: 409, title: 'Resource already exists' },
  'concurrent-update': { status: 409, title: 'Resource is being modified concurrently' },
  'idempotency-in-flight': { status: 409, title: 'A request with this Idempotency-Key is in progress' },
  'precondition-failed': { status: 412, title: 'Precondition failed' },
  'payload-too-large': { status: 413, title: 'Request body too large' },
  'uri-too-long': { status: 414, title: 'Request target too long' },
  'unsupported-media-type': { status: 415, title: 'Unsupported media type' },
  'unsupported-content-encoding': { status: 415, title: 'Unsupported content encoding' },
  'expectation-failed': { status: 417, title: 'Expectation failed' },
  'idempotency-key-reused': { status: 422, title: 'Idempotency-Key reused for a different request' },
  'header-fields-too-large': { status: 431, title: 'Request header fields too large' },
  'internal': { status: 500, title: 'Internal server error' },
  'service-unavailable': { status: 503, title: 'Service unavailable' },
} as const satisfies Record<string, ProblemType>;

export interface ProblemType {
  status: number;
  title: string;
}

/**
 * The problem types a module adds to the built-in ones (a gateway feature's, from its folder): each
 * declared here by augmenting this interface (`declare module '@app/shared/platform/problem'`) and
 * defined by `addProblemType`, so that an HttpProblem of it type-checks and the API description
 * lists it.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by declaration merging
export interface AddedProblemTypes {}

export type ProblemKind = keyof typeof builtInProblemTypes | keyof AddedProblemTypes;

/** The stable problem types: `type` = PROBLEM_BASE + key. Documented in docs/api.md ("Errors"). */
export const problemTypes: Readonly<Record<ProblemKind, ProblemType>> = { ...builtInProblemTypes } as Record<ProblemKind, ProblemType>;

const added = new Set<ProblemKind>();

/**
 * Defines a problem type `AddedProblemTypes` declares when its module loads; returns its kind. The
 * same definition again is no second one (a module loaded from its source and from its build, as
 * tests may); a different one is refused.
 */
export function addProblemType<Kind extends keyof AddedProblemTypes>(kind: Kind, type: ProblemType): Kind {
  const defined: ProblemType | undefined = Object.hasOwn(problemTypes, kind) ? (problemTypes as Record<string, ProblemType>)[kind] : undefined;
  if (defined?.status === type.status && defined.title === type.title && added.has(kind)) return kind;
  if (defined) throw new Error(`The problem type ${kind} is defined twice`);
  (problemTypes as Record<string, ProblemType>)[kind] = type;
  added.add(kind);
  return kind;
}

/**
 * Every problem type defined so far, by status; within a status, the added ones first (a gateway
 * feature refuses before a service can), each group in the order it was defined.
 */
export const problemKinds = (): ProblemKind[] =>
  (Object.keys(problemTypes) as ProblemKind[]).sort((a, b) => problemTypes[a].status - problemTypes[b].status || Number(added.has(b)) - Number(added.has(a)));

export class HttpProblem extends Error {
  readonly type: string;
  readonly title: string;
  readonly status: number;

  constructor(
    readonly kind: ProblemKind,
    readonly detail: string,
    readonly extras: { errors?: FieldError[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(detail, { cause: extras.cause });
    this.name = 'HttpProblem';
    this.type = PROBLEM_BASE + kind;
    this.title = problemTypes[kind].title;
    this.status = problemTypes[kind].status;
  }

  toJSON(instance: string): Record<string, unknown> {
    const body: Record<string, unknown> = {
      type: this.type,
      title: this.title,
      status: this.status,
      detail: this.detail,
      instance,
    };
    if (this.extras.errors) body.errors = this.extras.errors;
    return body;
  }
}

export const RETRY_AFTER_SECONDS = 5;

/** How many invalid fields a validation problem lists; its detail counts them all. */
export const MAX_LISTED_FIELD_ERRORS = 20;

export const problems = {
  validation: (errors: FieldError[]) =>
    new HttpProblem(
      'validation',
      `${errors.length === 1 ? '1 field is' : `${errors.length} fields are`} invalid${errors.length > MAX_LISTED_FIELD_ERRORS ? `; the first ${MAX_LISTED_FIELD_ERRORS} are listed` : ''}`,
      { errors: errors.slice(0, MAX_LISTED_FIELD_ERRORS) },
    ),
  notFound: (detail: string) => new HttpProblem('not-found', detail),
  methodNotAllowed: (method: string, allow: readonly string[]) =>
    new HttpProblem('method-not-allowed', `${method} is not supported here; use ${allow.join(', ')}`, {
      headers: { Allow: allow.join(', ') },
    }),
  conflict: (path: string, message: string) =>
    new HttpProblem('conflict', `${path} ${message}`, { errors: [{ path, message }] }),
  preconditionFailed: (detail = 'If-Match does not match the current ETag of the resource') => new HttpProblem('precondition-failed', detail),
  unavailable: (detail: string, cause?: unknown) =>
    new HttpProblem('service-unavailable', detail, {
      headers: retryAfter(RETRY_AFTER_SECONDS),
      cause,
    }),
};
