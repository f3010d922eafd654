import type { IncomingHttpHeaders } from 'node:http';
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type RequestHandler } from 'express';
import { HttpProblem, problems, type FieldError } from '../problem.js';

/** Request bodies: the size limit, and JSON accepted only as this API defines it. */

/** The largest request body, unless a service's entry in services.json sets its own (`body.limitBytes`). */
export const BODY_LIMIT_BYTES = 100 * 1024;

/** A body limit as its 413 names it: `100kb`, or `1500b` where it is no whole number of KiB. */
export const bodyLimitText = (limitBytes: number): string => (limitBytes % 1024 === 0 ? `${limitBytes / 1024}kb` : `${limitBytes}b`);

/** How deep objects and arrays may nest in a request body: far more than any resource needs. */
export const MAX_JSON_DEPTH = 32;
/** The content codings a request body may have (`Accept-Encoding` of a 415 says so). */
export const ACCEPTED_CONTENT_ENCODING = 'identity';

function mediaType(header: string | undefined): string | undefined {
  return header?.split(';', 1)[0]?.trim().toLowerCase();
}

/** A 415 for a body with a content coding this API does not accept. */
export function unsupportedEncoding(detail: string): HttpProblem {
  // RFC 9110 §15.5.16: a 415 caused by a content coding says which codings would have been accepted.
  return new HttpProblem('unsupported-content-encoding', detail, { headers: { 'Accept-Encoding': ACCEPTED_CONTENT_ENCODING } });
}

/** A body-parser `verify` failure: mapped to malformed-json by `expressProblem`. */
const invalidJson = (message: string) => Object.assign(new Error(message), { status: 400, type: 'entity.json.invalid' });

/**
 * Whether objects and arrays in the JSON text `bytes` nest deeper than `limit`: one pass over the
 * bytes, before anything parses or walks the value recursively. No JSON library offers a depth
 * limit, hence this.
 */
export function nestsDeeperThan(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (inString) {
      if (byte === 0x5c) i++; // backslash: the next byte is escaped
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x7b || byte === 0x5b) {
      if (++depth > limit) return true;
    } else if (byte === 0x7d || byte === 0x5d) depth--;
  }
  return false;
}

/** The raw body, checked before it is parsed: UTF-8 only (never replaced by U+FFFD), nesting bounded. */
function checkJsonBytes(_req: IncomingMessage, _res: ServerResponse, body: Buffer): void {
  if (!isUtf8(body)) throw invalidJson('The request body is not valid UTF-8');
  if (nestsDeeperThan(body, MAX_JSON_DEPTH)) throw invalidJson(`The request body nests objects or arrays deeper than ${MAX_JSON_DEPTH} levels`);
}

/** Member names that mean something to JavaScript objects: never a field of this API. */
const FORBIDDEN_MEMBERS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * How many values (array items and object members) a request body may hold, in all: far more than
 * any resource's fields, and few enough that nothing done per value costs much.
 */
export const MAX_JSON_VALUES = 1_000;

/** A container met in a body, and how to name where it is (built only for an error). */
interface Container {
  value: object;
  parent: Container | undefined;
  key: string;
}

const pathOf = (container: Container, key?: string): string => {
  const keys = key === undefined ? [] : [key];
  for (let at: Container | undefined = container; at?.parent; at = at.parent) keys.unshift(at.key);
  return keys.join('.') || 'body';
};

const tooMany = (at: string, what: string): FieldError[] => [{ path: at, message: `must have at most ${MAX_JSON_VALUES} ${what}` }];

/**
 * What is wrong with a parsed body before any schema reads it, in one pass without recursion: a
 * body that is not a JSON object; more than MAX_JSON_VALUES values, in one array or object (named)
 * or in all (refused as soon as the count is known, before the values are looked at); a member
 * named `__proto__`, `constructor` or `prototype` anywhere. Every resource body is an object of a
 * few fields, so a client that sends anything else learns it at once, and costs no work per value.
 */
export function bodyShapeErrors(body: unknown): FieldError[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return [{ path: 'body', message: body === null ? 'must not be null' : 'must be a JSON object' }];
  }
  const found: FieldError[] = [];
  const pending: Container[] = [{ value: body, parent: undefined, key: '' }];
  let values = 0;
  for (let container = pending.pop(); container; container = pending.pop()) {
    const { value } = container;
    const isArray = Array.isArray(value);
    // An array's length is known before any of its items is touched.
    const keys = isArray ? undefined : Object.keys(value);
    const count = keys?.length ?? (value as unknown[]).length;
    if (count > MAX_JSON_VALUES) return tooMany(pathOf(container), isArray ? 'items' : 'members');
    values += count;
    if (values > MAX_JSON_VALUES) return tooMany('body', 'values in all (array items and object members)');
    for (let index = 0; index < count; index++) {
      const key = keys?.[index] ?? String(index);
      if (keys && FORBIDDEN_MEMBERS.has(key)) found.push({ path: pathOf(container, key), message: 'is not a known field' });
      const member: unknown = (value as Record<string, unknown>)[key];
      if (typeof member === 'object' && member !== null) pending.push({ value: member, parent: container, key });
    }
  }
  return found;
}

/**
 * A body that declares more than `limitBytes` is refused at once, before any of it is read (the
 * connection closes: the rest of the body is not wanted). Without this, the body parser would
 * wait for the whole declared body before answering.
 */
const refuseOversizedBodies =
  (limitBytes: number): RequestHandler =>
  (req, res, next) => {
    if (declaresOversizedBody(req.headers, limitBytes)) {
      res.setHeader('Connection', 'close');
      throw bodyTooLarge(limitBytes);
    }
    next();
  };

/** Whether a request declares a body over `limitBytes` (`Content-Length`): refused before it is read. */
export const declaresOversizedBody = (headers: IncomingHttpHeaders, limitBytes = BODY_LIMIT_BYTES): boolean => {
  const declared = headers['content-length'];
  return declared !== undefined && Number(declared) > limitBytes;
};

/** The answer to a body over `limitBytes`, declared or counted as it arrives. */
export const bodyTooLarge = (limitBytes = BODY_LIMIT_BYTES) => new HttpProblem('payload-too-large', `The request body is larger than ${bodyLimitText(limitBytes)}`);

/**
 * Accepts only a JSON body of the given media types (415 otherwise) without a content coding (415
 * with Accept-Encoding), of at most `limitBytes` (413), parsed as valid UTF-8, nested at most MAX_JSON_DEPTH
 * levels (400 malformed-json), and then only a JSON object of a bounded shape (`bodyShapeErrors`, 400).
 */
export function jsonBody(mediaTypes: readonly string[] = ['application/json'], limitBytes = BODY_LIMIT_BYTES): RequestHandler[] {
  return [
    (req, _res, next) => {
      const type = mediaType(req.headers['content-type']);
      if (type === undefined || !mediaTypes.includes(type)) {
        throw new HttpProblem(
          'unsupported-media-type',
          `The request body must be ${mediaTypes.join(' or ')}${type ? `, not ${type}` : ''}`,
        );
      }
      const encoding = req.headers['content-encoding']?.trim().toLowerCase();
      if (encoding !== undefined && encoding !== ACCEPTED_CONTENT_ENCODING) {
        throw unsupportedEncoding(`The request body must not be encoded (Content-Encoding: ${ACCEPTED_CONTENT_ENCODING}), not ${encoding.slice(0, 64)}`);
      }
      next();
    },
    refuseOversizedBodies(limitBytes),
    express.json({ type: () => true, limit: limitBytes, strict: true, inflate: false, verify: checkJsonBytes }),
    (req, _res, next) => {
      const errors = bodyShapeErrors(req.body);
      if (errors.length > 0) throw problems.validation(errors);
      next();
    },
  ];
}

