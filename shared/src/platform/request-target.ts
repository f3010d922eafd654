import { API_PREFIX } from './services.js';

/**
 * One meaning for every request target, decided once: the gateway routes, caches, invalidates and
 * labels metrics on what this returns, and the services refuse what it refuses, so no request is a
 * write to one resource for a service and to another (or to none) for the gateway.
 *
 * The API's paths have exactly one spelling, `/api/<resource>` or `/api/<resource>/<id>` with a
 * lower-case UUIDv7 id; any other spelling of a path under `/api` has no canonical form and is a 404
 * (the list: docs/api.md, "One spelling per path"). Normalising instead would need a decision for
 * each spelling (is `%2F` a slash?), and every decision is one more way for two parsers to disagree.
 * Absolute-form (RFC 9112) is read as its path and query; the query string is passed on as it came
 * (the cache normalises it for its keys).
 *
 * Hand-written rather than a URL library: a WHATWG or RFC 3986 parser normalises (dot segments,
 * case, encoding), which is exactly what must not happen silently here. It is one linear pass with
 * no regular expression that can backtrack: it runs on every request.
 */

/** The API's ids: UUIDv7, lower case. */
export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** What an API request touches: a resource's list, or one item of it. */
export interface ApiTarget {
  /** The resource's name as in its path: `users` for `/api/users`. */
  resource: string;
  /** The item's id; absent for the list. */
  id?: string;
}

/** A request target in its canonical form. */
export interface RequestTarget {
  /** The path, e.g. `/api/users/<id>`. */
  path: string;
  /** The query string without `?`, as it came ('' when none). */
  query: string;
  /** Set for a path under `/api`: what it touches. */
  api?: ApiTarget;
  /** Origin-form: path and query, what is forwarded. */
  url: string;
}

const SLASH = 0x2f;

function isLowerLetter(code: number): boolean {
  return code >= 0x61 && code <= 0x7a;
}

/** The path and query of an origin-form or absolute-form (`http://host/...`) target; undefined otherwise (`*`). */
function originForm(url: string): string | undefined {
  if (url.charCodeAt(0) === SLASH) return url;
  const schemeEnd = url.startsWith('http://') ? 7 : url.startsWith('https://') ? 8 : /^https?:\/\//i.test(url) ? url.indexOf('//') + 2 : -1;
  if (schemeEnd < 0) return undefined;
  for (let i = schemeEnd; i < url.length; i++) {
    const code = url.charCodeAt(i);
    if (code === SLASH) return url.slice(i);
    if (code === 0x3f /* ? */) return `/${url.slice(i)}`;
  }
  return '/';
}

/**
 * Whether the path's first segment means `api` to a lenient router: any letter case, percent-encoded
 * letters, or hidden behind empty or dot segments (`//api`, `/./api`). Such paths are API paths that
 * are not canonical.
 */
function looksLikeApi(path: string): boolean {
  const end = path.indexOf('/', 1);
  const first = end < 0 ? path.slice(1) : path.slice(1, end);
  if (first === '' || first === '.' || first === '..') return path.length > 1;
  if (first.length > 9) return false; // `api` with every letter percent-encoded is 9 characters
  let decoded = first;
  if (first.includes('%')) {
    try {
      decoded = decodeURIComponent(first);
    } catch {
      return false;
    }
  }
  return decoded.toLowerCase() === 'api' || decoded === '.' || decoded === '..';
}

/** `<resource>` or `<resource>/<id>` after `/api/`: the target, or undefined when not canonical. */
function apiTarget(rest: string): ApiTarget | undefined {
  const slash = rest.indexOf('/');
  const resource = slash < 0 ? rest : rest.slice(0, slash);
  if (resource.length === 0) return undefined;
  for (let i = 0; i < resource.length; i++) if (!isLowerLetter(resource.charCodeAt(i))) return undefined;
  if (slash < 0) return { resource };
  const id = rest.slice(slash + 1);
  return id.length === 36 && UUID_V7.test(id) ? { resource, id } : undefined;
}

/**
 * The canonical form of a request target (`req.url`), or undefined when it has none (answer 404).
 * Paths outside `/api` (the processes' own endpoints) keep their spelling.
 */
export function requestTarget(url: string): RequestTarget | undefined {
  const target = originForm(url);
  if (target === undefined || target.includes('#')) return undefined;
  const queryStart = target.indexOf('?');
  const path = queryStart < 0 ? target : target.slice(0, queryStart);
  // A `\` in the path is a `/` to the legacy URL parser that express's router falls back on for
  // absolute-form targets (and some characters): it could name an API path to a service.
  if (path.includes('\\')) return undefined;
  const query = queryStart < 0 ? '' : target.slice(queryStart + 1);
  if (path.startsWith(`${API_PREFIX}/`)) {
    const api = apiTarget(path.slice(API_PREFIX.length + 1));
    return api && { path, query, api, url: target };
  }
  if (path === API_PREFIX || looksLikeApi(path)) return undefined;
  return { path, query, url: target };
}
