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
  /**
   * WRITE_DEADLINE_MS: no write made for a request commits later than this after the request
   * arrived; it is rolled back instead (503). The gateway counts on this bound (see `boundWrites`).
   */
  writeDeadlineMs: number;
}

/** What queries are counted by: a statement's first word, never its text (bounded). */
export const STATEMENT_KINDS = ['select', 'insert', 'update', 'delete', 'other'] as const;
export type StatementKind = (typeof STATEMENT_KINDS)[number];

const FIRST_WORD = /^\s*([A-Za-z]+)/;

/** The kind of `sql`: select, insert, update or delete by its first word; anything else (transaction control, DDL) is other. */
export function statementKind(sql: string): StatementKind {
  const word = FIRST_WORD.exec(sql)?.[1]?.toLowerCase();
  return word === 'select' || word === 'insert' || word === 'update' || word === 'delete' ? word : 'other';
}

/** Told of what a Database does, for metrics: each statement's kind and duration, each write rolled back at its deadline. */
export interface DatabaseObserver {
  statement(kind: StatementKind, seconds: number): void;
  writeDeadlineRollback(): void;
}

/** What a pool holds now: connections in use and idle, requests waiting for one, and its limit. */
export interface PoolUse {
  inUse: number;
  idle: number;
  waiting: number;
  limit: number;
}

/** The fields of mysql2's pool that say what it holds: its own, untyped, but its stats have no other source. */
interface PoolQueues {
  _allConnections: { length: number };
  _freeConnections: { length: number };
  _connectionQueue: { length: number };
}

/** WRITE_DEADLINE_MS by default; a gateway's SERVICE_WRITE_DEADLINE_MS must not be less. */
export const DEFAULT_WRITE_DEADLINE_MS = 5_000;

/** Prepared statements a connection keeps (least recently used are closed): more than the services use. */
const MAX_PREPARED_STATEMENTS = 64;

const defaultLimits: DatabaseLimits = {
  connectionLimit: 10,
  queueLimit: 200,
  connectTimeoutMs: 2_000,
  acquireTimeoutMs: 2_000,
  queryTimeoutMs: 5_000,
  writeDeadlineMs: DEFAULT_WRITE_DEADLINE_MS,
};

const isQueryTimeout = (error: unknown) => (error as { code?: unknown } | null)?.code === 'PROTOCOL_SEQUENCE_TIMEOUT';

/** A transaction under way: its connection, the write deadline it commits before, whether a statement timed out. */
interface Transaction {
  connection: PoolConnection;
  deadline: number | undefined;
  timedOut: boolean;
}

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
  /** The transaction the current async context runs in, if any. */
  readonly #transaction = new AsyncLocalStorage<Transaction>();
  /** The write deadline (performance.now() time) of the request the current async context serves. */
  readonly #requestDeadline = new AsyncLocalStorage<number>();
  /** The problems #pastDeadline made: a transaction that fails with one was rolled back at its deadline. */
  readonly #pastDeadlineProblems = new WeakSet<object>();

  constructor(
    url: string,
    limits: Partial<DatabaseLimits> = {},
    private readonly observer?: DatabaseObserver,
  ) {
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

  /** How long after a request arrived a write made for it may still commit (WRITE_DEADLINE_MS). */
  get writeDeadlineMs(): number {
    return this.#limits.writeDeadlineMs;
  }

  /**
   * Runs `next` (the rest of a request's handling) under the write deadline of a request arriving
   * now: every write it makes commits before `writeDeadlineMs` from now, or not at all. A gateway
   * that gave up on a write (timeout, reset, 5xx) knows from this how long it may still land, and
   * keeps what it affects out of its cache until then.
   */
  boundWrites(next: () => void): void {
    this.#requestDeadline.run(performance.now() + this.#limits.writeDeadlineMs, next);
  }

  /**
   * Runs one statement: rows for SELECT, a result header otherwise. Inside `transaction(work)` it
   * runs on that transaction's connection, so data-layer code takes part without knowing it, and it
   * is cut off at the transaction's write deadline.
   *
   * A prepared statement: each connection prepares a statement once, after that a read is one round
   * trip that sends only the values. mysql2's callback API, wrapped here once: its promise API
   * captures a stack trace for every query, a cost every read would pay for nothing.
   */
  query<T = RowDataPacket[]>(sql: string, values: SqlValue[] = []): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const settle = (error: unknown, result: unknown) => (error ? reject(error) : resolve(result as T));
      const current = this.#transaction.getStore();
      if (current) {
        this.#run(current.connection, 'execute', sql, values, settle, current);
        return;
      }
      this.#acquire((acquireError, connection) => {
        if (acquireError || !connection) {
          reject(this.#classify(acquireError));
          return;
        }
        this.#run(connection, 'execute', sql, values, (error, result, timedOut) => {
          // mysql2 leaves a timed-out statement running on its connection: it is not used again.
          if (timedOut) connection.destroy();
          else connection.release();
          settle(error, result);
        });
      });
    });
  }

  /**
   * Runs `work` in one READ COMMITTED transaction: every query it makes (through this Database)
   * commits together, or none does when it throws. READ COMMITTED so that an optimistic update that
   * retries reads the row another writer just committed, not its first snapshot. Within a request
   * (`boundWrites`), COMMIT is never sent after the request's write deadline: past it the
   * transaction is rolled back (503), and a statement still running then is cut off with its
   * connection, which makes MySQL (and MariaDB) roll the transaction back.
   */
  async transaction<T>(work: () => Promise<T>): Promise<T> {
    if (this.#transaction.getStore()) return work();
    const deadline = this.#requestDeadline.getStore();
    if (deadline !== undefined && performance.now() >= deadline) throw this.#pastDeadline();
    const connection = await new Promise<PoolConnection>((resolve, reject) =>
      this.#acquire((error, acquired) => (error || !acquired ? reject(this.#classify(error)) : resolve(acquired))),
    );
    const transaction: Transaction = { connection, deadline, timedOut: false };
    // Transaction control is plain text: not every server prepares it.
    // COMMIT and ROLLBACK are not cut off at the deadline (`bounded`): only the query timeout.
    const control = (sql: string, bounded: Transaction | undefined = transaction) =>
      new Promise<void>((resolve, reject) =>
        this.#run(
          connection,
          'query',
          sql,
          [],
          (error, _result, timedOut) => {
            if (timedOut) transaction.timedOut = true;
            if (error) reject(error);
            else resolve();
          },
          bounded,
        ),
      );
    let result: T;
    try {
      await control('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
      await control('START TRANSACTION');
      result = await this.#transaction.run(transaction, work);
      if (deadline !== undefined && performance.now() >= deadline) throw this.#pastDeadline();
      await control('COMMIT', undefined);
    } catch (error) {
      if (transaction.timedOut) {
        // Closing the connection is the rollback: the server rolls back what a closed connection left open.
        connection.destroy();
      } else {
        // A connection whose transaction state is unknown is not given back to the pool.
        await control('ROLLBACK', undefined).then(() => connection.release(), () => connection.destroy());
      }
      const failure = this.#classify(error);
      if (this.#pastDeadlineProblems.has(failure as object)) this.observer?.writeDeadlineRollback();
      throw failure;
    }
    connection.release();
    return result;
  }

  /** Affected rows of an INSERT, UPDATE or DELETE; within a request, bounded by its write deadline. */
  async execute(sql: string, values: SqlValue[] = []): Promise<number> {
    const write = async () => (await this.query<ResultSetHeader>(sql, values)).affectedRows;
    return this.#requestDeadline.getStore() === undefined || this.#transaction.getStore() ? write() : this.transaction(write);
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

  /** What the pool holds now (for metrics). */
  poolUse(): PoolUse {
    const pool = this.#pool as unknown as PoolQueues;
    const all = pool._allConnections.length;
    const idle = pool._freeConnections.length;
    return { inUse: all - idle, idle, waiting: pool._connectionQueue.length, limit: this.#limits.connectionLimit };
  }

  close(): Promise<void> {
    return new Promise((resolve, reject) => this.#pool.end((error) => (error ? reject(error) : resolve())));
  }

  /**
   * One statement on `connection`, prepared (`execute`) or as text (`query`), bounded by the query
   * timeout, and by the write deadline of `transaction` when given (a timeout marks it).
   */
  #run(
    connection: PoolConnection,
    kind: 'execute' | 'query',
    sql: string,
    values: SqlValue[],
    done: (error: unknown, result?: unknown, timedOut?: boolean) => void,
    transaction?: Transaction,
  ): void {
    const started = performance.now();
    try {
      connection[kind]({ sql, values, timeout: this.#timeoutBefore(transaction?.deadline) }, (error: unknown, result: unknown) => {
        this.observer?.statement(statementKind(sql), (performance.now() - started) / 1000);
        if (!error) {
          done(undefined, result);
          return;
        }
        const timedOut = isQueryTimeout(error);
        if (timedOut && transaction) transaction.timedOut = true;
        done(this.#classify(error, transaction?.deadline), undefined, timedOut);
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

  /** A statement's timeout: the query timeout, or less to stop at `deadline`. */
  #timeoutBefore(deadline: number | undefined): number {
    if (deadline === undefined) return this.#limits.queryTimeoutMs;
    return Math.max(1, Math.min(this.#limits.queryTimeoutMs, Math.ceil(deadline - performance.now())));
  }

  #pastDeadline(): HttpProblem {
    const problem = problems.unavailable(`The write did not complete within ${this.#limits.writeDeadlineMs} ms of the request and was not applied; try again shortly`);
    this.#pastDeadlineProblems.add(problem);
    return problem;
  }

  #classify(error: unknown, deadline?: number): unknown {
    if (error instanceof HttpProblem) return error;
    if (deadline !== undefined && isQueryTimeout(error) && performance.now() >= deadline - 1) return this.#pastDeadline();
    if (!isUnavailable(error)) return error;
    return problems.unavailable('The database is unavailable; try again shortly', error);
  }
}
