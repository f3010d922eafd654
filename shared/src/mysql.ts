import { AsyncLocalStorage } from 'node:async_hooks';
import mysql from 'mysql2/promise';
import { HttpProblem, problems } from './problem.js';

/** Values a query may bind. */
export type SqlValue = string | number | boolean | Date | Buffer | null;

export interface DatabaseLimits {
  /** Connections the pool opens at most. */
  connectionLimit: number;
  /** Requests that may wait for a connection; more fail at once with 503. */
  queueLimit: number;
  /** How long to wait for a TCP connection to MySQL. */
  connectTimeoutMs: number;
  /** How long a request waits for a free connection before it fails with 503. */
  acquireTimeoutMs: number;
  /** How long one query may run. */
  queryTimeoutMs: number;
}

const defaultLimits: DatabaseLimits = {
  connectionLimit: 10,
  queueLimit: 200,
  connectTimeoutMs: 2_000,
  acquireTimeoutMs: 2_000,
  queryTimeoutMs: 5_000,
};

// Errors that say "the database cannot be reached or is overloaded", not "this query is wrong".
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  'ER_LOCK_WAIT_TIMEOUT',
  'ER_QUERY_TIMEOUT',
  'ER_STATEMENT_TIMEOUT',
  'POOL_QUEUE_FULL',
  'POOL_ACQUIRE_TIMEOUT',
]);

function isUnavailable(error: unknown): boolean {
  // Duck-typed: errors from node:net may come from another realm than this module's Error.
  if (typeof error !== 'object' || error === null) return false;
  const { code, fatal, message } = error as { code?: unknown; fatal?: unknown; message?: unknown };
  return fatal === true || (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) || message === 'Queue limit reached.';
}

class PoolError extends Error {
  constructor(
    readonly code: 'POOL_QUEUE_FULL' | 'POOL_ACQUIRE_TIMEOUT',
    message: string,
  ) {
    super(message);
  }
}

/** True when `error` is MySQL's duplicate-key error for the unique index `indexName`. */
export function isDuplicateKey(error: unknown, indexName: string): boolean {
  const { code, message } = error as { code?: string; message?: string };
  // MySQL 8 names the key `table.index`, MariaDB just `index`.
  return code === 'ER_DUP_ENTRY' && typeof message === 'string' && new RegExp(`[.']${indexName}'`).test(message);
}

/**
 * A bounded mysql2 pool: a dead or saturated database fails a request fast with a 503 problem
 * (Retry-After) instead of queueing it without limit; the pool reconnects by itself.
 */
export class Database {
  readonly #pool: mysql.Pool;
  readonly #limits: DatabaseLimits;
  /** The connection of the transaction the current async context runs in, if any. */
  readonly #transaction = new AsyncLocalStorage<mysql.PoolConnection>();

  constructor(url: string, limits: Partial<DatabaseLimits> = {}) {
    this.#limits = { ...defaultLimits, ...limits };
    this.#pool = mysql.createPool({
      uri: url,
      connectionLimit: this.#limits.connectionLimit,
      maxIdle: this.#limits.connectionLimit,
      idleTimeout: 60_000,
      queueLimit: this.#limits.queueLimit,
      connectTimeout: this.#limits.connectTimeoutMs,
      enableKeepAlive: true,
      timezone: 'Z',
      dateStrings: false,
      decimalNumbers: false, // DECIMAL stays a string: exact
      supportBigNumbers: true,
      bigNumberStrings: true,
    });
    // An idle connection that dies is dropped by the pool; nothing to do but not crash.
    this.#pool.on('connection', (connection) => connection.on('error', () => undefined));
  }

  /**
   * Runs one statement; rows for SELECT, a result header otherwise. Inside `transaction(work)` it
   * runs on that transaction's connection, so data-layer code takes part without knowing it.
   */
  async query<T = mysql.RowDataPacket[]>(sql: string, values: SqlValue[] = []): Promise<T> {
    const current = this.#transaction.getStore();
    const connection = current ?? (await this.#acquire());
    try {
      const [result] = await connection.query({ sql, values, timeout: this.#limits.queryTimeoutMs });
      return result as T;
    } catch (error) {
      throw this.#classify(error);
    } finally {
      if (!current) connection.release();
    }
  }

  /**
   * Runs `work` in one READ COMMITTED transaction: every query it makes (through this Database)
   * commits together, or none does when it throws. READ COMMITTED so that an optimistic update that
   * retries reads the row another writer just committed, not its first snapshot.
   */
  async transaction<T>(work: () => Promise<T>): Promise<T> {
    if (this.#transaction.getStore()) return work();
    const connection = await this.#acquire();
    let result: T;
    try {
      await connection.query({ sql: 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED', timeout: this.#limits.queryTimeoutMs });
      await connection.query({ sql: 'START TRANSACTION', timeout: this.#limits.queryTimeoutMs });
      result = await this.#transaction.run(connection, work);
      await connection.query({ sql: 'COMMIT', timeout: this.#limits.queryTimeoutMs });
    } catch (error) {
      // A connection whose transaction state is unknown is not given back to the pool.
      await connection.query({ sql: 'ROLLBACK', timeout: this.#limits.queryTimeoutMs }).then(() => connection.release(), () => connection.destroy());
      throw this.#classify(error);
    }
    connection.release();
    return result;
  }

  /** Affected rows of an INSERT, UPDATE or DELETE. */
  async execute(sql: string, values: SqlValue[] = []): Promise<number> {
    const header = await this.query<mysql.ResultSetHeader>(sql, values);
    return header.affectedRows;
  }

  /** Why the database cannot serve, or undefined when it answers. */
  async unreadyReason(): Promise<string | undefined> {
    try {
      await this.query('SELECT 1');
      return undefined;
    } catch {
      return 'The database is not reachable';
    }
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }

  async #acquire(): Promise<mysql.PoolConnection> {
    const pending = this.#pool.getConnection();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new PoolError('POOL_ACQUIRE_TIMEOUT', `no database connection within ${this.#limits.acquireTimeoutMs} ms`)),
        this.#limits.acquireTimeoutMs,
      );
    });
    try {
      return await Promise.race([pending, timeout]);
    } catch (error) {
      // A connection that arrives after we gave up goes straight back to the pool.
      pending.then((connection) => connection.release(), () => undefined);
      throw this.#classify(error);
    } finally {
      clearTimeout(timer);
    }
  }

  #classify(error: unknown): unknown {
    if (error instanceof HttpProblem || !isUnavailable(error)) return error;
    return problems.unavailable('The database is unavailable; try again shortly', error);
  }
}
