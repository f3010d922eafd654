import { z } from 'zod';
import { problems, type FieldError } from './problem.js';

/** Messages that read well in a problem's `errors` list ("email: is required"). */
const messages: z.core.$ZodErrorMap = (issue) => {
  if (issue.code === 'invalid_type') {
    if (issue.input === undefined) return 'is required';
    if (issue.input === null) return 'must not be null';
    return `must be ${issue.expected === 'object' ? 'a JSON object' : `a${/^[aeiou]/.test(issue.expected) ? 'n' : ''} ${issue.expected}`}`;
  }
  return undefined;
};

/** The value at `path` in `input`, or undefined when some step of it is missing. */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

function fieldErrors(error: z.ZodError, input: unknown): FieldError[] {
  return error.issues.flatMap((issue): FieldError[] => {
    const at = issue.path.map(String);
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: [...at, key].join('.'), message: 'is not a known field' }));
    }
    // A schema's own message (`z.int('must be a whole number')`) wins over `messages` in zod, and
    // would tell a client who left a field out that its type is wrong.
    const missing = issue.code === 'invalid_type' && issue.path.length > 0 && valueAt(input, issue.path) === undefined;
    return [{ path: at.join('.') || 'body', message: missing ? 'is required' : issue.message }];
  });
}

/** Parses `input` with `schema`, or throws a 400 validation problem listing every invalid field. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input, { error: messages });
  if (!result.success) throw problems.validation(fieldErrors(result.error, input));
  return result.data;
}

const codePoints = (value: string) => [...value].length;

/**
 * A string of `min` to `max` characters (Unicode code points, as MySQL counts them), after removing
 * surrounding white space when `trim` is set. JSON Schema's minLength/maxLength count code points
 * too, so the API description states the same rule.
 */
export function text(min: number, max: number, options: { trim?: boolean } = {}): z.ZodType<string, string> {
  const counted = z
    .string()
    .refine((value) => value.isWellFormed(), { message: 'must be valid Unicode text (no lone surrogates)' })
    .refine((value) => codePoints(value) >= min, { message: min === 1 ? 'must not be empty' : `must be at least ${min} characters` })
    .refine((value) => codePoints(value) <= max, { message: `must be at most ${max} characters` })
    .meta({ minLength: min, maxLength: max });
  if (!options.trim) return counted;
  // What a request may send (the same rule, around any white space) and, piped into `counted`, what is stored.
  const padded = z
    .string()
    .trim()
    .meta({ description: `Surrounding white space is removed; then ${min} to ${max} characters.`, pattern: trimmedLengthPattern(min, max) });
  return padded.pipe(counted);
}

/**
 * A JSON Schema pattern (ECMA-262, which counts code points) for "`min` to `max` characters once
 * surrounding white space is removed": `\s` is the white space String.prototype.trim removes.
 */
function trimmedLengthPattern(min: number, max: number): string {
  const cores = [
    ...(min <= 1 && max >= 1 ? ['\\S'] : []),
    ...(max >= 2 ? [`\\S[\\s\\S]{${Math.max(min, 2) - 2},${max - 2}}\\S`] : []),
  ];
  const core = cores.length > 0 ? `(?:${cores.join('|')})${min === 0 ? '?' : ''}` : '';
  return `^\\s*${core}\\s*$`;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(value: unknown): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 7396 JSON merge patch: `null` removes a member, objects merge, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const result = new Map<string, unknown>(Object.entries(isObject(target) ? target : {}));
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) result.delete(key);
    else result.set(key, mergePatch(result.get(key), value));
  }
  return Object.fromEntries(result);
}
