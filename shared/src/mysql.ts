import { AsyncLocalStorage } from 'node:async_hooks';
import mysql, { type Pool, type PoolConnection, type ResultSetHeader, type RowDataPacket } from 'mysql2';
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

/** Prepared statements a connection keeps (least recently used are closed): more than the services use. */
const MAX_PREPARED_STATEMENTS = 64;

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

// mysql2's pool errors that carry no code: its queue is full, or it was closed (shutting down).
const UNAVAILABLE_MESSAGES = new Set(['Queue limit reached.', 'Pool is closed.']);

function isUnavailable(error: unknown): boolean {
  // Duck-typed: errors from node:net may come from another realm than this module's Error.
  if (typeof error !== 'object' || error === null) return false;
  const { code, fatal, message } = error as { code?: unknown; fatal?: unknown; message?: unknown };
  return fatal === true || (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) || UNAVAILABLE_MESSAGES.has(message as string);
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
  readonly #pool: Pool;
  readonly #limits: DatabaseLimits;
  /** The connection of the transaction the current async context runs in, if any. */
  readonly #transaction = new AsyncLocalStorage<PoolConnection>();

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
      // Every statement is prepared once per connection; the services use a handful of them.
      maxPreparedStatements: MAX_PREPARED_STATEMENTS,
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
   * Runs one statement: rows for SELECT, a result header otherwise. Inside `transaction(work)` it
   * runs on that transaction's connection, so data-layer code takes part without knowing it.
   *
   * A prepared statement: each connection prepares a statement once, after that a read is one round
   * trip that sends only the values. mysql2's callback API, wrapped here once: its promise API
   * captures a stack trace for every query, which cost 13% of a read's CPU time.
   */
  query<T = RowDataPacket[]>(sql: string, values: SqlValue[] = []): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const settle = (error: unknown, result: unknown) => (error ? reject(error) : resolve(result as T));
      const current = this.#transaction.getStore();
      if (current) {
        this.#run(current, 'execute', sql, values, settle);
        return;
      }
      this.#acquire((acquireError, connection) => {
        if (acquireError || !connection) {
          reject(this.#classify(acquireError));
          return;
        }
        this.#run(connection, 'execute', sql, values, (error, result) => {
          connection.release();
          settle(error, result);
        });
      });
    });
  }

  /**
   * Runs `work` in one READ COMMITTED transaction: every query it makes (through this Database)
   * commits together, or none does when it throws. READ COMMITTED so that an optimistic update that
   * retries reads the row another writer just committed, not its first snapshot.
   */
  async transaction<T>(work: () => Promise<T>): Promise<T> {
    if (this.#transaction.getStore()) return work();
    const connection = await new Promise<PoolConnection>((resolve, reject) =>
      this.#acquire((error, acquired) => (error || !acquired ? reject(this.#classify(error)) : resolve(acquired))),
    );
    // Transaction control is plain text: not every server prepares it.
    const control = (sql: string) =>
      new Promise<void>((resolve, reject) => this.#run(connection, 'query', sql, [], (error) => (error ? reject(error) : resolve())));
    let result: T;
    try {
      await control('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
      await control('START TRANSACTION');
      result = await this.#transaction.run(connection, work);
      await control('COMMIT');
    } catch (error) {
      // A connection whose transaction state is unknown is not given back to the pool.
      await control('ROLLBACK').then(() => connection.release(), () => connection.destroy());
      throw this.#classify(error);
    }
    connection.release();
    return result;
  }

  /** Affected rows of an INSERT, UPDATE or DELETE. */
  async execute(sql: string, values: SqlValue[] = []): Promise<number> {
    const header = await this.query<ResultSetHeader>(sql, values);
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

  close(): Promise<void> {
    return new Promise((resolve, reject) => this.#pool.end((error) => (error ? reject(error) : resolve())));
  }

  /** One statement on `connection`, prepared (`execute`) or as text (`query`), bounded by the query timeout. */
  #run(connection: PoolConnection, kind: 'execute' | 'query', sql: string, values: SqlValue[], done: (error: unknown, result?: unknown) => void): void {
    try {
      connection[kind]({ sql, values, timeout: this.#limits.queryTimeoutMs }, (error: unknown, result: unknown) => {
        if (error) done(this.#classify(error));
        else done(undefined, result);
      });
    } catch (error) {
      done(error);
    }
  }

  /** A pooled connection, or an error when none is free within the acquire timeout or the queue is full. */
  #acquire(callback: (error: unknown, connection?: PoolConnection) => void): void {
    let gaveUp = false;
    const timer = setTimeout(() => {
      gaveUp = true;
      callback(new PoolError('POOL_ACQUIRE_TIMEOUT', `no database connection within ${this.#limits.acquireTimeoutMs} ms`));
    }, this.#limits.acquireTimeoutMs);
    this.#pool.getConnection((error, connection) => {
      if (gaveUp) {
        // A connection that arrives after we gave up goes straight back to the pool.
        connection?.release();
        return;
      }
      clearTimeout(timer);
      callback(error, connection);
    });
  }

  #classify(error: unknown): unknown {
    if (error instanceof HttpProblem || !isUnavailable(error)) return error;
    return problems.unavailable('The database is unavailable; try again shortly', error);
  }
}
