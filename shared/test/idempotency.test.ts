import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { jest } from '@jest/globals';
import express from 'express';
import mysql from 'mysql2/promise';
import { problemHandler } from '@app/shared/platform/http/failures';
import { requestContext } from '@app/shared/platform/http/observation';
import { createLogger } from '@app/shared/platform/logger';
import { Database } from '@app/shared/platform/mysql';
import { HttpProblem, problems } from '@app/shared/platform/problem';
import {
  IDEMPOTENCY_KEY,
  idempotencyProblems,
  idempotent,
  type IdempotencyStore,
  type IdempotentRequest,
  type StoredResponse,
} from '@app/shared/resource/idempotency';
import { MySqlIdempotencyStore } from '@app/shared/resource/idempotency-store';

/**
 * `Idempotency-Key` on writes: the handler as a client sees it (over HTTP, on a store that records
 * what it is asked), and the MySQL store of keys against the local MySQL, in a schema of its own.
 */

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** A store of keys in memory that records, in order, what the handler asks of it. */
function memoryKeys() {
  const calls: string[] = [];
  const requests: IdempotentRequest[] = [];
  const held = new Map<string, { fingerprint: string; token: string; response?: StoredResponse }>();
  let tokens = 0;
  const at = (request: IdempotentRequest) => `${request.scope}\n${request.key}`;
  const store: IdempotencyStore & { completes: boolean; failRelease: boolean; failTrim: boolean } = {
    claimSeconds: 7,
    completes: true,
    failRelease: false,
    failTrim: false,
    claim: async (request) => {
      calls.push('claim');
      requests.push(request);
      const key = held.get(at(request));
      if (!key) {
        const token = `token-${++tokens}`;
        held.set(at(request), { fingerprint: request.fingerprint, token });
        return { kind: 'claimed', token };
      }
      if (key.fingerprint !== request.fingerprint) throw idempotencyProblems.reused();
      if (key.response) return { kind: 'replay', response: key.response };
      throw idempotencyProblems.inFlight(3);
    },
    transaction: async (work) => {
      calls.push('begin');
      try {
        const result = await work();
        calls.push('commit');
        return result;
      } catch (error) {
        calls.push('rollback');
        throw error;
      }
    },
    complete: async (request, token, response) => {
      calls.push(`complete ${token}`);
      const key = held.get(at(request));
      if (!store.completes || key?.token !== token) return false;
      key.response = response;
      return true;
    },
    release: async (request, token) => {
      calls.push(`release ${token}`);
      if (store.failRelease) throw new Error('the database went away');
      if (held.get(at(request))?.token === token) held.delete(at(request));
    },
    trim: async (request) => {
      calls.push(`trim ${request.scope}`);
      if (store.failTrim) throw new Error('the database went away');
      return 0;
    },
  };
  return { store, calls, requests };
}

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
}

/**
 * An express app with `idempotent` on POST and PATCH of `/things` (collection `/things`), behind the
 * services' request context and problem handler. The write answers 201 with the body it was sent
 * and how many writes ran, or fails with a 409 when the body asks for it.
 */
async function thingsApp() {
  const keys = memoryKeys();
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('test', 'warn', { write: (line: string) => void lines.push(JSON.parse(line)) });
  let runs = 0;
  const handle = async (req: express.Request): Promise<StoredResponse> => {
    keys.calls.push('handle');
    if ((req.body as { fail?: boolean } | undefined)?.fail) throw problems.conflict('name', 'is already taken');
    runs++;
    return { status: 201, headers: { Location: `/things/${runs}`, ETag: `"${runs}"` }, body: JSON.stringify({ run: runs, sent: req.body ?? null }) };
  };
  const app = express();
  app.use(requestContext(logger));
  app.post('/things', express.json(), idempotent(keys.store, '/things', handle));
  app.patch('/things', express.json(), idempotent(keys.store, '/things', handle));
  app.put('/things', idempotent(keys.store, '/things', handle));
  app.use(problemHandler());
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const send = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> => {
    const response = await fetch(origin + path, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, body: text ? JSON.parse(text) : undefined };
  };
  return {
    ...keys,
    lines,
    runs: () => runs,
    send,
    post: (body: unknown, key?: string, headers: Record<string, string> = {}) => send('POST', '/things', body, key === undefined ? headers : { 'idempotency-key': key, ...headers }),
    close: () => new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve()))),
  };
}

describe('idempotent (the write handler)', () => {
  let app: Awaited<ReturnType<typeof thingsApp>>;
  beforeEach(async () => {
    app = await thingsApp();
  });
  afterEach(() => app.close());

  it('without a key, runs every request and sends its response, asking nothing of the store', async () => {
    const first = await app.post({ name: 'a' });
    const second = await app.post({ name: 'a' });
    expect(first).toMatchObject({ status: 201, body: { run: 1, sent: { name: 'a' } } });
    expect(first.headers.get('location')).toBe('/things/1');
    expect(first.headers.get('etag')).toBe('"1"');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(second).toMatchObject({ status: 201, body: { run: 2 } });
    expect(app.calls).toEqual(['handle', 'handle']);
  });

  it('with a key, runs the first request, stores its response with the write, and replays it to a retry without running again', async () => {
    const first = await app.post({ name: 'a' }, 'key-1');
    expect(first).toMatchObject({ status: 201, body: { run: 1, sent: { name: 'a' } } });
    expect([first.headers.get('location'), first.headers.get('etag'), first.headers.get('idempotent-replayed')]).toEqual(['/things/1', '"1"', null]);
    // Claimed, written and stored in one transaction, then the scope trimmed.
    expect(app.calls).toEqual(['claim', 'begin', 'handle', 'complete token-1', 'commit', 'trim /things']);

    const retry = await app.post({ name: 'a' }, 'key-1');
    expect(retry.status).toBe(201);
    expect(retry.text).toBe(first.text);
    expect([retry.headers.get('location'), retry.headers.get('etag'), retry.headers.get('idempotent-replayed')]).toEqual(['/things/1', '"1"', 'true']);
    expect(app.runs()).toBe(1);
    expect(app.calls.slice(6)).toEqual(['claim']);
  });

  it('fingerprints the request as the SHA-256 of method, target and body (JSON with sorted members), as every replica does', async () => {
    await app.send('POST', '/things?x=1', { b: [1, { d: 2, c: 3 }], a: 'é' }, { 'idempotency-key': 'k' });
    await app.send('PUT', '/things', undefined, { 'idempotency-key': 'k2' });
    expect(app.requests).toEqual([
      { scope: '/things', key: 'k', fingerprint: sha256('POST /things?x=1\n{"a":"é","b":[1,{"c":3,"d":2}]}') },
      { scope: '/things', key: 'k2', fingerprint: sha256('PUT /things\nnull') },
    ]);
  });

  it('takes a retry whose body has its members in another order for the same request', async () => {
    const first = await app.post({ a: 1, b: 2 }, 'key-1');
    const retry = await app.post({ b: 2, a: 1 }, 'key-1');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
  });

  it('answers 422 to the key with another body, method or target, and runs nothing', async () => {
    await app.post({ name: 'a' }, 'key-1');
    const reused = [
      await app.post({ name: 'b' }, 'key-1'),
      await app.send('PATCH', '/things', { name: 'a' }, { 'idempotency-key': 'key-1' }),
      await app.send('POST', '/things?again', { name: 'a' }, { 'idempotency-key': 'key-1' }),
    ];
    for (const answer of reused) {
      expect(answer).toMatchObject({ status: 422, body: { type: 'https://problems.example/idempotency-key-reused', instance: '/things' } });
    }
    expect(app.runs()).toBe(1);
  });

  it('scopes keys to the collection and the subject the gateway forwards, percent-decoded', async () => {
    await app.post({ name: 'a' }, 'key-1');
    const theirs = await app.post({ name: 'a' }, 'key-1', { 'x-auth-subject': 'ada%20lovelace%2Fé' });
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(app.requests.map(({ scope }) => scope)).toEqual(['/things', '/things ada lovelace/é']);
    expect(app.runs()).toBe(2);
  });

  it('answers 400 to a subject that is not percent-encoded UTF-8, and runs nothing', async () => {
    const answer = await app.post({ name: 'a' }, 'key-1', { 'x-auth-subject': 'ada%E0%A4%A' });
    expect(answer).toMatchObject({ status: 400, body: { type: 'https://problems.example/validation', errors: [{ path: 'X-Auth-Subject', message: 'must be percent-encoded UTF-8' }] } });
    expect(app.calls).toEqual([]);
  });

  it.each([
    ['empty', ''],
    ['with a space', 'a b'],
    ['with a tab', 'a\tb'],
    ['non-ASCII', 'clé'],
    ['256 characters', 'k'.repeat(256)],
  ])('answers 400 to a key that is %s, and runs nothing', async (_what, key) => {
    const answer = await app.post({ name: 'a' }, key);
    expect(answer).toMatchObject({ status: 400, body: { type: 'https://problems.example/validation', errors: [{ path: 'Idempotency-Key', message: 'must be 1 to 255 visible ASCII characters' }] } });
    expect(app.calls).toEqual([]);
  });

  it('accepts keys of 1 to 255 visible ASCII characters, from ! to ~', async () => {
    for (const key of ['!', '~', '"', '}', `${'!~'.repeat(127)}x`]) expect((await app.post({ key }, key)).status).toBe(201);
    expect(app.requests.map(({ key }) => key.length)).toEqual([1, 1, 1, 1, 255]);
    // What HTTP clients cannot send in a header, the pattern refuses too.
    expect(['a\x7f', 'a\nb', 'a\u0100'].filter((key) => IDEMPOTENCY_KEY.test(key))).toEqual([]);
  });

  it('releases the key of a request that failed, which changed nothing: the same request runs again', async () => {
    const failed = await app.post({ fail: true }, 'key-1');
    expect(failed).toMatchObject({ status: 409, body: { type: 'https://problems.example/conflict' } });
    expect(app.calls).toEqual(['claim', 'begin', 'handle', 'rollback', 'release token-1']);
    const again = await app.post({ fail: true }, 'key-1');
    expect(again.status).toBe(409);
    expect(app.calls.slice(5)).toEqual(['claim', 'begin', 'handle', 'rollback', 'release token-2']);
  });

  it("answers with the request's own failure when giving its key up fails too", async () => {
    app.store.failRelease = true;
    const failed = await app.post({ fail: true }, 'key-1');
    expect(failed).toMatchObject({ status: 409, body: { type: 'https://problems.example/conflict', detail: 'name is already taken' } });
  });

  it('answers 409 in flight, Retry-After a claim, when another request took the key over before the response was stored', async () => {
    app.store.completes = false;
    const late = await app.post({ name: 'a' }, 'key-1');
    expect(late).toMatchObject({
      status: 409,
      body: { type: 'https://problems.example/idempotency-in-flight', detail: 'A request with this Idempotency-Key is still in progress; retry after 7 s' },
    });
    expect(late.headers.get('retry-after')).toBe('7');
    expect(app.calls).toEqual(['claim', 'begin', 'handle', 'complete token-1', 'rollback', 'release token-1']);
  });

  it('sends the response of a write whose trim failed, and logs a warning', async () => {
    app.store.failTrim = true;
    const created = await app.post({ name: 'a' }, 'key-1');
    expect(created).toMatchObject({ status: 201, body: { run: 1 } });
    expect(app.lines).toEqual([expect.objectContaining({ level: 'warn', err: expect.objectContaining({ message: 'the database went away' }) })]);
    expect((await app.post({ name: 'a' }, 'key-1')).headers.get('idempotent-replayed')).toBe('true');
  });
});

/** The idempotency_keys table as the resource engine's migrations make it. */
const KEYS_TABLE_MIGRATIONS = ['0001_create_idempotency_keys.sql', '0002_bound_idempotency_keys_per_caller.sql'].map((file) =>
  readFileSync(new URL(`../migrations/${file}`, import.meta.url), 'utf8'),
);

describe('MySqlIdempotencyStore', () => {
  const schema = `t_${randomBytes(5).toString('hex')}_idempotency`;
  /** Write deadline 2.5 s, so a claim holds 3.5 s (the deadline and COMMIT_MARGIN_MS). */
  const WRITE_DEADLINE_MS = 2_500;
  const LEASE_MS = 3_500;
  let admin: mysql.Connection;
  let db: Database;
  /** The clock of the store's decisions (Date.now). */
  const T = Date.UTC(2031, 0, 2, 3, 4, 5, 678);
  let now: jest.SpiedFunction<typeof Date.now>;

  beforeAll(async () => {
    admin = await mysql.createConnection(process.env.TEST_MYSQL_URL!);
    await admin.query(`CREATE DATABASE \`${schema}\``);
    const url = new URL(process.env.TEST_MYSQL_URL!);
    url.pathname = `/${schema}`;
    db = new Database(url.toString(), { writeDeadlineMs: WRITE_DEADLINE_MS });
    for (const migration of KEYS_TABLE_MIGRATIONS) await db.query(migration);
  });
  afterAll(async () => {
    await db?.close();
    await admin?.query(`DROP DATABASE IF EXISTS \`${schema}\``);
    await admin?.end();
  });
  beforeEach(() => {
    now = jest.spyOn(Date, 'now').mockReturnValue(T);
  });
  afterEach(() => now.mockRestore());

  const at = (ms: number) => now.mockReturnValue(T + ms);
  const fingerprint = (n: number) => sha256(`request ${n}`);
  /** A request in a scope of its own. */
  const request = (n = 1): IdempotentRequest => ({ scope: `/things ${randomBytes(6).toString('hex')}`, key: `key-${n}`, fingerprint: fingerprint(n) });
  const response: StoredResponse = { status: 201, headers: { Location: '/things/1', ETag: '"1"' }, body: '{"name":"é"}' };
  const row = async ({ scope, key }: IdempotentRequest) =>
    (await db.query('SELECT fingerprint, token, locked_until, expires_at, response_status, response_headers, response_body, response_bytes FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?', [createHash('sha256').update(scope).digest(), key]))[0];
  const claimed = async (store: MySqlIdempotencyStore, of: IdempotentRequest): Promise<string> => {
    const claim = await store.claim(of);
    if (claim.kind !== 'claimed') throw new Error(`expected a claim, got ${JSON.stringify(claim)}`);
    return claim.token;
  };
  const refusal = async (promise: Promise<unknown>) => {
    const error = await promise.then(() => undefined, (caught: unknown) => caught);
    expect(error).toBeInstanceOf(HttpProblem);
    const problem = error as HttpProblem;
    return { kind: problem.kind, retryAfter: problem.extras.headers?.['Retry-After'] };
  };

  it('claims a new key in flight for the write deadline and a margin, and keeps it for a day by default', async () => {
    const store = new MySqlIdempotencyStore(db);
    expect(store.claimSeconds).toBe(4);
    const of = request();
    const token = await claimed(store, of);
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    expect(await row(of)).toEqual({
      fingerprint: Buffer.from(of.fingerprint, 'hex'),
      token: Buffer.from(token, 'hex'),
      locked_until: new Date(T + LEASE_MS),
      expires_at: new Date(T + 86_400_000),
      response_status: null,
      response_headers: null,
      response_body: null,
      response_bytes: 0,
    });
  });

  it('answers 409 with the seconds left of the claim while a key is in flight, and lets another request take it over when the claim lapses', async () => {
    const store = new MySqlIdempotencyStore(db, { ttlSeconds: 60 });
    const of = request();
    const first = await claimed(store, of);
    expect(await refusal(store.claim(of))).toEqual({ kind: 'idempotency-in-flight', retryAfter: '4' });
    at(2_600);
    expect(await refusal(store.claim(of))).toEqual({ kind: 'idempotency-in-flight', retryAfter: '1' });
    at(LEASE_MS - 1);
    expect(await refusal(store.claim(of))).toEqual({ kind: 'idempotency-in-flight', retryAfter: '1' });
    at(LEASE_MS);
    const second = await claimed(store, of);
    expect(second).not.toBe(first);
    expect(await row(of)).toMatchObject({ token: Buffer.from(second, 'hex'), locked_until: new Date(T + 2 * LEASE_MS), expires_at: new Date(T + 60_000) });
    // The request that lost its claim can no longer store its response; the one that took it over can.
    expect(await store.complete(of, first, response)).toBe(false);
    expect(await store.complete(of, second, response)).toBe(true);
    expect(await store.complete(of, second, response)).toBe(false);
  });

  it('answers 422 to the key with another request, in flight or done', async () => {
    const store = new MySqlIdempotencyStore(db);
    const of = request();
    const token = await claimed(store, of);
    const other = { ...of, fingerprint: fingerprint(2) };
    expect(await refusal(store.claim(other))).toEqual({ kind: 'idempotency-key-reused', retryAfter: undefined });
    await store.complete(of, token, response);
    expect(await refusal(store.claim(other))).toEqual({ kind: 'idempotency-key-reused', retryAfter: undefined });
  });

  it('stores the response with what it counts against its scope (its UTF-8 bytes and 128 for the row), and replays it until the key expires', async () => {
    const store = new MySqlIdempotencyStore(db, { ttlSeconds: 60 });
    const of = request();
    expect(await store.complete(of, await claimed(store, of), response)).toBe(true);
    expect(await row(of)).toMatchObject({
      response_status: 201,
      response_headers: '{"Location":"/things/1","ETag":"\\"1\\""}',
      response_body: '{"name":"é"}',
      response_bytes: 128 + 'key-1'.length + Buffer.byteLength(JSON.stringify(response.headers)) + Buffer.byteLength(response.body),
    });
    at(59_999);
    expect(await store.claim(of)).toEqual({ kind: 'replay', response });
  });

  it('frees an expired key for any request: the response stored is forgotten', async () => {
    const store = new MySqlIdempotencyStore(db, { ttlSeconds: 60 });
    const of = request();
    await store.complete(of, await claimed(store, of), response);
    at(60_000);
    const other = { ...of, fingerprint: fingerprint(2) };
    const token = await claimed(store, other);
    expect(await row(of)).toEqual({
      fingerprint: Buffer.from(other.fingerprint, 'hex'),
      token: Buffer.from(token, 'hex'),
      locked_until: new Date(T + 60_000 + LEASE_MS),
      expires_at: new Date(T + 120_000),
      response_status: null,
      response_headers: null,
      response_body: null,
      response_bytes: 0,
    });
    // Expired while in flight too.
    at(120_000);
    expect((await store.claim(of)).kind).toBe('claimed');
  });

  it('keeps the keys of each scope apart', async () => {
    const store = new MySqlIdempotencyStore(db);
    const mine = request();
    await store.complete(mine, await claimed(store, mine), response);
    const theirs = { ...request(), key: mine.key };
    expect((await store.claim(theirs)).kind).toBe('claimed');
    expect(await store.claim(mine)).toEqual({ kind: 'replay', response });
  });

  it('gives up a key in flight with its token only, so the same request runs again; never a stored response', async () => {
    const store = new MySqlIdempotencyStore(db);
    const of = request();
    const token = await claimed(store, of);
    await store.release(of, randomBytes(16).toString('hex'));
    expect(await row(of)).toBeDefined();
    await store.release({ ...of, scope: `${of.scope}!` }, token);
    expect(await row(of)).toBeDefined();
    await store.release(of, token);
    expect(await row(of)).toBeUndefined();
    const again = await claimed(store, of);
    await store.complete(of, again, response);
    await store.release(of, again);
    expect(await store.claim(of)).toEqual({ kind: 'replay', response });
  });

  /** `db`, with `before` run ahead of each statement the store sends. */
  function intercepted(before: (kind: 'query' | 'execute', sql: string) => Promise<void>): Database {
    return {
      writeDeadlineMs: db.writeDeadlineMs,
      query: async (sql: string, values?: never[]) => (await before('query', sql), db.query(sql, values)),
      execute: async (sql: string, values?: never[]) => (await before('execute', sql), db.execute(sql, values)),
      transaction: (work: () => Promise<unknown>) => db.transaction(work),
    } as unknown as Database;
  }
  const steal = (of: IdempotentRequest) =>
    db.execute('UPDATE idempotency_keys SET token = ? WHERE scope = ? AND idempotency_key = ?', [randomBytes(16), createHash('sha256').update(of.scope).digest(), of.key]);

  it('claims anew a key given up between its INSERT and its SELECT', async () => {
    const of = request();
    await claimed(new MySqlIdempotencyStore(db), of);
    let released = false;
    const store = new MySqlIdempotencyStore(
      intercepted(async (_kind, sql) => {
        if (sql.startsWith('SELECT') && !released) {
          released = true;
          await db.execute('DELETE FROM idempotency_keys WHERE idempotency_key = ?', [of.key]);
        }
      }),
    );
    const token = await claimed(store, of);
    expect(await store.complete(of, token, response)).toBe(true);
  });

  it.each([
    ['expired', { ttlSeconds: 1 }],
    ['past its claim', {}],
  ])('tries again when another request takes a key %s over first, and claims it on a later attempt', async (_what, options) => {
    const of = request();
    await claimed(new MySqlIdempotencyStore(db, options), of);
    at(10_000);
    let stolen = 0;
    const store = new MySqlIdempotencyStore(
      intercepted(async (_kind, sql) => {
        if (sql.startsWith('UPDATE') && stolen++ === 0) await steal(of);
      }),
      options,
    );
    const token = await claimed(store, of);
    expect(stolen).toBe(2);
    expect(await store.complete(of, token, response)).toBe(true);
  });

  it('answers 409, retry after 1 s, when the key changes hands under each of its 3 attempts', async () => {
    const of = request();
    await claimed(new MySqlIdempotencyStore(db), of);
    at(LEASE_MS);
    const inserts: string[] = [];
    const store = new MySqlIdempotencyStore(
      intercepted(async (_kind, sql) => {
        if (sql.startsWith('INSERT')) inserts.push(sql);
        if (sql.startsWith('UPDATE')) await steal(of);
      }),
    );
    expect(await refusal(store.claim(of))).toEqual({ kind: 'idempotency-in-flight', retryAfter: '1' });
    expect(inserts).toHaveLength(3);
  });

  it('lets an error other than a taken key through, a duplicate in another index too', async () => {
    // A long entry is cut short with "...", as MySQL and MariaDB write it.
    const failure = Object.assign(new Error("Duplicate entry '\\xAB\\xCD\\xEF...' for key 'idempotency_keys.ix_other'"), { code: 'ER_DUP_ENTRY' });
    const store = new MySqlIdempotencyStore(
      intercepted(async (kind) => {
        if (kind === 'execute') throw failure;
      }),
    );
    await expect(store.claim(request())).rejects.toBe(failure);
  });

  describe('trim', () => {
    /** Stores `keys` responses in `scope`, each expiring 1 ms after the previous one; each counts 200 bytes. */
    async function stored(store: MySqlIdempotencyStore, scope: string, keys: string[], sameTime = false) {
      for (const [i, key] of keys.entries()) {
        if (!sameTime) at(i);
        const of = { scope, key, fingerprint: fingerprint(i) };
        // 128 + the key (2) + "{}" (2) + 68 bytes of body.
        await store.complete(of, await claimed(store, of), { status: 200, headers: {}, body: 'b'.repeat(68) });
      }
    }
    const keysOf = async (scope: string) =>
      (await db.query('SELECT idempotency_key FROM idempotency_keys WHERE scope = ? ORDER BY idempotency_key', [createHash('sha256').update(scope).digest()])).map((r) => r.idempotency_key as string);

    it("drops a scope's oldest responses beyond its budget, keeping what comes to the budget at most and the keys in flight", async () => {
      const store = new MySqlIdempotencyStore(db, { scopeBytes: 400 });
      const { scope } = request();
      const other = request().scope;
      // An old key in flight, then five stored responses of 200 bytes each, oldest first.
      at(-10);
      await claimed(store, { scope, key: 'k0', fingerprint: fingerprint(0) });
      await stored(store, scope, ['k1', 'k2', 'k3', 'k4', 'k5']);
      await stored(store, other, ['k1', 'k2', 'k3']);
      expect(await store.trim({ scope, key: 'k5', fingerprint: fingerprint(5) })).toBe(3);
      expect(await keysOf(scope)).toEqual(['k0', 'k4', 'k5']);
      expect(await keysOf(other)).toEqual(['k1', 'k2', 'k3']);
      expect(await store.trim({ scope, key: 'k5', fingerprint: fingerprint(5) })).toBe(0);
    });

    it('orders the responses of the same age by key', async () => {
      const store = new MySqlIdempotencyStore(db, { scopeBytes: 401 });
      const { scope } = request();
      await stored(store, scope, ['k3', 'k1', 'k4', 'k2'], true);
      expect(await store.trim({ scope, key: 'k1', fingerprint: fingerprint(1) })).toBe(1);
      expect(await keysOf(scope)).toEqual(['k2', 'k3', 'k4']);
    });

    it('keeps 1 MiB of a scope by default', async () => {
      const store = new MySqlIdempotencyStore(db);
      const { scope } = request();
      const body = 'b'.repeat(524_288 - 128 - 2 - 2);
      for (const [i, key] of ['k1', 'k2', 'k3'].entries()) {
        at(i);
        const of = { scope, key, fingerprint: fingerprint(i) };
        await store.complete(of, await claimed(store, of), { status: 200, headers: {}, body });
      }
      expect(await store.trim({ scope, key: 'k3', fingerprint: fingerprint(3) })).toBe(1);
      expect(await keysOf(scope)).toEqual(['k2', 'k3']);
    });
  });

  it('purges the keys expired by a time, a batch of 1,000 at a time, and says how many', async () => {
    const store = new MySqlIdempotencyStore(db);
    const cutoff = new Date(Date.UTC(2001, 5, 1));
    const scope = createHash('sha256').update(request().scope).digest();
    const rows = Array.from({ length: 1_502 }, (_, i) => [scope, `old-${i}`, randomBytes(32), randomBytes(16), cutoff, new Date(cutoff.getTime() - i)]);
    rows.push([scope, 'later', randomBytes(32), randomBytes(16), cutoff, new Date(cutoff.getTime() + 1)]);
    await db.query(`INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, token, locked_until, expires_at) VALUES ${rows.map(() => '(?, ?, ?, ?, ?, ?)').join(', ')}`, rows.flat());
    expect(await store.purgeExpired(cutoff)).toBe(1_502);
    const left = await db.query('SELECT idempotency_key FROM idempotency_keys WHERE scope = ?', [scope]);
    expect(left).toEqual([{ idempotency_key: 'later' }]);
    // By default, the keys expired by now.
    expect(await store.purgeExpired()).toBe(1);
    expect(await store.purgeExpired()).toBe(0);
  });
});
