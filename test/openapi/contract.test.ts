/**
 * The contract checker that every e2e response goes through can fail: each kind of departure from
 * openapi.json is reported, and a wrong answer from a server fails the request in `client()`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { problemTypes, type ProblemKind } from '@app/shared/platform/problem';
import { apiContract, ContractViolation, type Exchange } from '../support/contract.js';
import { startContractProxy } from '../support/contract-proxy.js';
import { client } from '../support/http.js';

const contract = apiContract();
const ID = '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40';
const user = { id: ID, email: 'ada@example.com', name: 'Ada Lovelace', owner: 'auth0|ada', createdAt: '2026-11-21T10:00:00.000Z', updatedAt: '2026-11-21T10:00:00.000Z' };
const product = {
  id: ID,
  sku: 'WIDGET-42',
  name: 'Widget',
  description: '',
  price: { amount: '19.90', currency: 'EUR' },
  stock: 0,
  createdAt: '2026-11-21T10:00:00.000Z',
  updatedAt: '2026-11-21T10:00:00.000Z',
};
const JSON_TYPE = 'application/json; charset=utf-8';
const PROBLEM_TYPE = 'application/problem+json; charset=utf-8';

/** A correct GET /api/users/{id}, changed by `change`. */
function readUser(change: { status?: number; headers?: Record<string, string | null>; body?: unknown; method?: string; url?: string } = {}): Exchange {
  const headers = new Headers({ 'content-type': JSON_TYPE, 'x-request-id': 'r-1', etag: '"1"', 'cache-control': 'no-cache' });
  for (const [name, value] of Object.entries(change.headers ?? {})) {
    if (value === null) headers.delete(name);
    else headers.set(name, value);
  }
  const body = 'body' in change ? change.body : user;
  return {
    method: change.method ?? 'GET',
    url: change.url ?? `/api/users/${ID}`,
    status: change.status ?? 200,
    headers,
    text: body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body),
  };
}

const problem = (status: number, type: ProblemKind) => ({ type: `https://problems.example/${type}`, title: problemTypes[type].title, status, detail: 'x', instance: '/x' });

describe('the contract checker', () => {
  it('finds nothing wrong in conforming exchanges', () => {
    expect(contract.violations(readUser())).toEqual([]);
    expect(contract.violations(readUser({ headers: { 'x-cache': 'HIT', age: '3' } }))).toEqual([]);
    expect(contract.violations(readUser({ method: 'HEAD', body: undefined }))).toEqual([]);
    expect(contract.violations(readUser({ status: 404, headers: { 'content-type': PROBLEM_TYPE, etag: null, 'cache-control': null }, body: problem(404, 'not-found') }))).toEqual([]);
    const page = { method: 'GET', url: '/api/products?limit=1&sku=WIDGET-42', status: 200, headers: new Headers({ 'content-type': JSON_TYPE, 'x-request-id': 'r', 'cache-control': 'no-cache' }), text: JSON.stringify({ items: [product], nextCursor: null }) };
    expect(contract.violations(page)).toEqual([]);
  });

  it.each<[string, Parameters<typeof readUser>[0], RegExp]>([
    ['a status the operation does not describe', { status: 418 }, /418 is not a described response of GET \/api\/users\/\{id\}/],
    ['a missing required header', { headers: { 'x-request-id': null } }, /header X-Request-Id is missing/],
    ['a malformed header', { headers: { etag: 'W/"1"' } }, /header ETag: "W\/"1"" must match pattern/],
    ['a header outside its enum', { headers: { 'x-cache': 'MAYBE' } }, /header X-Cache: "MAYBE" must be equal to one of the allowed values/],
    ['a wrong Cache-Control', { headers: { 'cache-control': 'max-age=60' } }, /header Cache-Control: "max-age=60" must be equal to constant/],
    ['a body without a required field', { body: { ...user, email: undefined } }, /body must have required property 'email'/],
    ['a body with a field the schema does not have', { body: { ...user, password: 'x' } }, /body must NOT have additional properties/],
    ['a field of the wrong format', { body: { ...user, createdAt: '21.11.2026' } }, /body \/createdAt must match/],
    ['an undescribed media type', { headers: { 'content-type': 'text/plain' } }, /Content-Type text\/plain is not one of application\/json/],
    ['a body that is not JSON', { body: '{"id":' }, /body is not JSON/],
    ['a problem whose type does not fit its status', { status: 404, headers: { 'content-type': PROBLEM_TYPE }, body: problem(404, 'validation') }, /body \/type must be equal to one of the allowed values/],
    ['a problem with a stack trace', { status: 404, headers: { 'content-type': PROBLEM_TYPE }, body: { ...problem(404, 'not-found'), stack: 'at x.js:1' } }, /must NOT have additional properties/],
    ['a body on HEAD', { method: 'HEAD' }, /a 200 to HEAD must have no body/],
    ['a path that is not described, answered 200', { url: '/api/unlisted' }, /a path that is not described must be answered 404, not 200/],
    ['a method a path does not have, answered 200', { method: 'POST' }, /POST on \/api\/users\/\{id\} must be answered 405, not 200/],
    [
      'a 405 whose Allow is not the described methods',
      { method: 'POST', status: 405, headers: { 'content-type': PROBLEM_TYPE, allow: 'GET, HEAD' }, body: problem(405, 'method-not-allowed') },
      /Allow is "GET, HEAD"; the described methods are GET, HEAD, PUT, PATCH, DELETE/,
    ],
  ])('reports %s', (_what, change, expected) => {
    const violations = contract.violations(readUser(change));
    expect(violations.join('\n')).toMatch(expected);
  });

  it('reports a price amount sent as a JSON number, and a 304 with a body', () => {
    const exchange = readUser({ url: `/api/products/${ID}`, body: { ...product, price: { amount: 19.9, currency: 'EUR' } } });
    expect(contract.violations(exchange).join('\n')).toMatch(/body \/price\/amount must be string/);
    expect(contract.violations(readUser({ status: 304, body: user })).join('\n')).toMatch(/a 304 without described content must have no body/);
  });

  it('checks requests too, when it sees them', () => {
    const exchange = (url: string, body: unknown, contentType = 'application/json'): Exchange => ({
      method: 'POST',
      url,
      status: 201,
      headers: new Headers({ 'content-type': JSON_TYPE, 'x-request-id': 'r', etag: '"1"', location: `/api/users/${ID}` }),
      text: JSON.stringify(user),
      request: { headers: new Headers({ 'content-type': contentType }), text: JSON.stringify(body) },
    });
    expect(contract.violations(exchange('/api/users', { email: 'ada@example.com', name: 'Ada' }))).toEqual([]);
    expect(contract.violations(exchange('/api/users', { email: 'ada@example.com' })).join('\n')).toMatch(/request: body must have required property 'name'/);
    expect(contract.violations(exchange('/api/users?sort=name', { email: 'ada@example.com', name: 'Ada' })).join('\n')).toMatch(/request: query parameter sort is not described/);
    expect(contract.violations(exchange('/api/users', {}, 'text/plain')).join('\n')).toMatch(/request: Content-Type text\/plain is not one of application\/json/);
    const list = { method: 'GET', url: '/api/users?limit=500', status: 400, headers: new Headers({ 'content-type': PROBLEM_TYPE, 'x-request-id': 'r' }), text: JSON.stringify(problem(400, 'validation')), request: { headers: new Headers(), text: '' } };
    expect(contract.violations(list).join('\n')).toMatch(/request: query parameter limit must be <= 200/);
  });
});

describe('against a server that answers wrongly', () => {
  // A "users service" whose list lost its nextCursor.
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': JSON_TYPE, 'x-request-id': 'r-1', 'cache-control': 'no-cache' });
    res.end(JSON.stringify({ items: [user] }));
  });
  let url: string;
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it('client() fails the request', async () => {
    const api = client(url);
    await expect(api.get('/api/users')).rejects.toThrow(ContractViolation);
    await expect(api.get('/api/users')).rejects.toThrow(/GET \/api\/users → 200 departs from openapi.json:\n {2}- body must have required property 'nextCursor'/);
  });

  it('the contract-checking proxy reports it, and a request that departs from the contract', async () => {
    const proxy = await startContractProxy(url);
    try {
      await fetch(`${proxy.url}/api/users?limit=2`);
      await fetch(`${proxy.url}/api/users?colour=red`);
      expect(proxy.exchanges).toEqual(['GET /api/users?limit=2 → 200', 'GET /api/users?colour=red → 200']);
      expect(proxy.violations).toEqual([
        "GET /api/users?limit=2 → 200: body must have required property 'nextCursor'",
        'GET /api/users?colour=red → 200: request: query parameter colour is not described',
        "GET /api/users?colour=red → 200: body must have required property 'nextCursor'",
      ]);
    } finally {
      await proxy.close();
    }
  });
});
