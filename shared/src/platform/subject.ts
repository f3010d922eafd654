/**
 * The verified subject, from the gateway to the services (they trust it because only the gateway
 * can reach them): one header, one encoding, read here on both sides so that they never read a
 * subject differently. Percent-encoded: any subject is then a legal header value, with nothing for
 * an HTTP parser to trim.
 */
export const SUBJECT_HEADER = 'x-auth-subject';

/** The longest subject the gateway accepts (UTF-16 code units): at most 765 UTF-8 bytes, within a record's owner column (VARBINARY(1020)). */
export const MAX_SUBJECT_LENGTH = 255;

const CONTROL = /\p{Cc}/u;
const EDGE_SPACE = /^\p{White_Space}|\p{White_Space}$/u;

/**
 * What makes `subject` no acceptable `sub` (docs/api.md, "Access tokens"), or undefined when it is
 * one. The rule leaves one spelling per subject that any comparison, in code or in SQL, takes
 * exactly as it is: no lone surrogate (no UTF-8 form), no control character, no white space at either
 * end (which a PAD SPACE comparison or a trimming reader ignores), and Unicode NFC (so that `é` is
 * not also `e` and a combining accent).
 */
export function subjectFlaw(subject: unknown): string | undefined {
  if (typeof subject !== 'string' || subject === '' || subject.length > MAX_SUBJECT_LENGTH) return `is not a string of 1 to ${MAX_SUBJECT_LENGTH} characters`;
  if (!subject.isWellFormed()) return 'holds a lone surrogate';
  if (CONTROL.test(subject)) return 'holds a control character';
  if (EDGE_SPACE.test(subject)) return 'begins or ends with white space';
  if (subject.normalize('NFC') !== subject) return 'is not in Unicode NFC';
  return undefined;
}

/**
 * `admin` when the caller has the service's `<name>:admin` scope (it sees and changes every
 * record), absent otherwise: set, like the subject, only by the gateway.
 */
export const ROLE_HEADER = 'x-auth-role';
export const ADMIN_ROLE = 'admin';

/** The header value for `subject`, a well-formed string (a lone surrogate has no UTF-8 form). */
export const encodeSubject = (subject: string): string => encodeURIComponent(subject);

/** The subject a header value carries, exactly; undefined when it is not percent-encoded UTF-8. */
export function decodeSubject(value: string): string | undefined {
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}
