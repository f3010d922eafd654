import { createHash, randomBytes } from 'node:crypto';
import {
  COMMIT_MARGIN_MS,
  DEFAULT_IDEMPOTENCY_SCOPE_BYTES,
  DEFAULT_IDEMPOTENCY_TTL_SECONDS,
  idempotencyProblems,
  type Claim,
  type IdempotencyStore,
  type IdempotentRequest,
  type StoredResponse,
} from './idempotency.js';
import { isDuplicateKey, type Database } from '../platform/mysql.js';

const CLAIM_ATTEMPTS = 3;
const PURGE_BATCH = 1_000;
/** What a stored key costs beyond its response: its key, fingerprint, token, times and index entries. */
const KEY_OVERHEAD_BYTES = 128;

/** The bytes a stored response counts against its scope's budget. */
const storedBytes = (key: string, response: StoredResponse) =>
  KEY_OVERHEAD_BYTES + key.length + Buffer.byteLength(JSON.stringify(response.headers)) + Buffer.byteLength(response.body);

/**
 * Idempotency keys in the service's own schema (the `idempotency_keys` table of its migrations).
 * Every decision is a single-row statement the database serialises: an INSERT claims a new key, a
 * compare-and-set on `token` takes over an expired or abandoned one, and the response is stored
 * only while the claim's token still holds, in the transaction of the write.
 */
export class MySqlIdempotencyStore implements IdempotencyStore {
  readonly #ttlMs: number;
  /** How long a claim holds: the request's write deadline and a margin (see COMMIT_MARGIN_MS). */
  readonly #leaseMs: number;
  readonly #scopeBytes: number;
  readonly claimSeconds: number;
  /** Told of each request answered with its key's stored response (for metrics). */
  readonly #onReplay: () => void;

  constructor(
    private readonly db: Database,
    options: { ttlSeconds?: number; scopeBytes?: number; onReplay?: () => void } = {},
  ) {
    this.#onReplay = options.onReplay ?? (() => undefined);
    this.#ttlMs = (options.ttlSeconds ?? DEFAULT_IDEMPOTENCY_TTL_SECONDS) * 1000;
    this.#leaseMs = db.writeDeadlineMs + COMMIT_MARGIN_MS;
    this.claimSeconds = Math.ceil(this.#leaseMs / 1000);
    this.#scopeBytes = options.scopeBytes ?? DEFAULT_IDEMPOTENCY_SCOPE_BYTES;
  }

  async claim(request: IdempotentRequest): Promise<Claim> {
    const id = this.#id(request);
    const fingerprint = Buffer.from(request.fingerprint, 'hex');
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const now = Date.now();
      const token = randomBytes(16);
      const lockedUntil = new Date(now + this.#leaseMs);
      try {
        await this.db.execute(
          'INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, token, locked_until, expires_at) VALUES (?, ?, ?, ?, ?, ?)',
          [...id, fingerprint, token, lockedUntil, new Date(now + this.#ttlMs)],
        );
        return { kind: 'claimed', token: token.toString('hex') };
      } catch (error) {
        if (!isDuplicateKey(error, 'PRIMARY')) throw error;
      }
      const [row] = await this.db.query(
        'SELECT fingerprint, token, locked_until, expires_at, response_status, response_headers, response_body FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?',
        id,
      );
      if (!row) continue; // purged or released meanwhile: claim it anew
      const held = row.token as Buffer;
      if ((row.expires_at as Date).getTime() <= now) {
        // Expired: the key is free again, for any request.
        const taken = await this.db.execute(
          'UPDATE idempotency_keys SET fingerprint = ?, token = ?, locked_until = ?, expires_at = ?, response_status = NULL, response_headers = NULL, response_body = NULL, response_bytes = 0 WHERE scope = ? AND idempotency_key = ? AND token = ?',
          [fingerprint, token, lockedUntil, new Date(now + this.#ttlMs), ...id, held],
        );
        if (taken === 1) return { kind: 'claimed', token: token.toString('hex') };
        continue;
      }
      if (!fingerprint.equals(row.fingerprint as Buffer)) throw idempotencyProblems.reused();
      if (row.response_status !== null) {
        const response: StoredResponse = {
          status: Number(row.response_status),
          headers: JSON.parse(row.response_headers as string) as Record<string, string>,
          body: row.response_body as string,
        };
        this.#onReplay();
        return { kind: 'replay', response };
      }
      const lockedForMs = (row.locked_until as Date).getTime() - now;
      if (lockedForMs > 0) throw idempotencyProblems.inFlight(Math.ceil(lockedForMs / 1000));
      // In flight past its lease: the replica that claimed it died or gave up. Take it over.
      const taken = await this.db.execute(
        'UPDATE idempotency_keys SET token = ?, locked_until = ? WHERE scope = ? AND idempotency_key = ? AND token = ? AND response_status IS NULL',
        [token, lockedUntil, ...id, held],
      );
      if (taken === 1) return { kind: 'claimed', token: token.toString('hex') };
    }
    // The key changed hands under every attempt: busy, but free again soon.
    throw idempotencyProblems.inFlight(1);
  }

  transaction<T>(work: () => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  async complete(request: IdempotentRequest, token: string, response: StoredResponse): Promise<boolean> {
    const stored = await this.db.execute(
      'UPDATE idempotency_keys SET response_status = ?, response_headers = ?, response_body = ?, response_bytes = ? WHERE scope = ? AND idempotency_key = ? AND token = ? AND response_status IS NULL',
      [response.status, JSON.stringify(response.headers), response.body, storedBytes(request.key, response), ...this.#id(request), Buffer.from(token, 'hex')],
    );
    return stored === 1;
  }

  /**
   * Keeps the scope's newest stored responses while those newer than each come to less than its
   * budget, and drops the older ones: what the scope keeps is at most its budget and one response.
   * Keys in flight are left alone.
   */
  async trim(request: IdempotentRequest): Promise<number> {
    const [scope] = this.#id(request);
    const [oldestKept] = await this.db.query(
      `SELECT expires_at, idempotency_key FROM (
         SELECT expires_at, idempotency_key, response_bytes,
           SUM(response_bytes) OVER (ORDER BY expires_at DESC, idempotency_key DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS newer_and_own
         FROM idempotency_keys WHERE scope = ?
       ) AS newest_first
       WHERE newer_and_own - response_bytes >= ?
       ORDER BY expires_at DESC, idempotency_key DESC LIMIT 1`,
      [scope, this.#scopeBytes],
    );
    if (!oldestKept) return 0;
    const [age, key] = [oldestKept.expires_at as Date, oldestKept.idempotency_key as string];
    return this.db.execute(
      'DELETE FROM idempotency_keys WHERE scope = ? AND response_status IS NOT NULL AND (expires_at < ? OR (expires_at = ? AND idempotency_key <= ?))',
      [scope, age, age, key],
    );
  }

  /** Not bound by the request's write deadline (a plain `query`): giving a key up is safe at any time. */
  async release(request: IdempotentRequest, token: string): Promise<void> {
    await this.db.query('DELETE FROM idempotency_keys WHERE scope = ? AND idempotency_key = ? AND token = ? AND response_status IS NULL', [
      ...this.#id(request),
      Buffer.from(token, 'hex'),
    ]);
  }

  /** Deletes the expired keys, a batch at a time; returns how many. */
  async purgeExpired(now = new Date()): Promise<number> {
    let purged = 0;
    for (;;) {
      const deleted = await this.db.execute('DELETE FROM idempotency_keys WHERE expires_at <= ? LIMIT ?', [now, PURGE_BATCH]);
      purged += deleted;
      if (deleted < PURGE_BATCH) return purged;
    }
  }

  #id(request: IdempotentRequest): [Buffer, string] {
    return [createHash('sha256').update(request.scope).digest(), request.key];
  }
}
