import { Database } from '@app/shared/platform/mysql';
import { HttpProblem } from '@app/shared/platform/problem';
import { silentServer } from '../../tools/tcp-proxy.js';

/**
 * The bounded pool against the real MySQL server: a saturated or hung database fails a statement
 * fast with a 503 problem instead of letting it wait without limit.
 */
const serverUrl = () => process.env.TEST_MYSQL_URL!;

/** What `promise` settled with, and how long it took. */
async function outcome(promise: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  const error = await promise.then(() => undefined, (caught: unknown) => caught);
  return { error, ms: performance.now() - started };
}

function expectUnavailable(error: unknown): void {
  expect(error).toBeInstanceOf(HttpProblem);
  expect((error as HttpProblem).status).toBe(503);
  expect((error as HttpProblem).extras.headers).toEqual({ 'Retry-After': '5' });
}

describe('Database', () => {
  it('returns rows with exact decimals, dates and binary values, and affected rows of a write', async () => {
    const db = new Database(serverUrl());
    try {
      const [row] = await db.query("SELECT CAST('19.90' AS DECIMAL(12,2)) AS amount, CAST('2026-01-02 03:04:05.678' AS DATETIME(3)) AS at, UNHEX('0102') AS bin, ? AS n", [42]);
      expect(row).toEqual({ amount: '19.90', at: new Date('2026-01-02T03:04:05.678Z'), bin: Buffer.from([1, 2]), n: 42 });
      expect(await db.execute('DO 1')).toBe(0);
    } finally {
      await db.close();
    }
  });

  it('fails a statement that waits longer than the acquire timeout for a connection with 503', async () => {
    const db = new Database(serverUrl(), { connectionLimit: 1, acquireTimeoutMs: 200 });
    try {
      const holding = db.query('SELECT SLEEP(1)');
      const waiting = await outcome(db.query('SELECT 1'));
      expectUnavailable(waiting.error);
      expect(waiting.ms).toBeLessThan(900);
      await holding;
      expect(await db.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
  });

  it('fails a statement at once with 503 when the queue for connections is full', async () => {
    const db = new Database(serverUrl(), { connectionLimit: 1, queueLimit: 1 });
    try {
      const holding = db.query('SELECT SLEEP(1)');
      const queued = db.query('SELECT 1');
      const refused = await outcome(db.query('SELECT 1'));
      expectUnavailable(refused.error);
      expect(refused.ms).toBeLessThan(500);
      await Promise.all([holding, queued]);
    } finally {
      await db.close();
    }
  });

  it('fails a statement that runs longer than the query timeout with 503', async () => {
    const db = new Database(serverUrl(), { queryTimeoutMs: 200 });
    try {
      const slow = await outcome(db.query('SELECT SLEEP(2)'));
      expectUnavailable(slow.error);
      expect(slow.ms).toBeLessThan(1_500);
      expect(await db.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
  });

  it('fails with 503 when the database accepts connections but never answers', async () => {
    const hung = await silentServer();
    const db = new Database(`mysql://root@${new URL(hung.url).host}/none`, { connectTimeoutMs: 200 });
    try {
      const result = await outcome(db.query('SELECT 1'));
      expectUnavailable(result.error);
      expect(result.ms).toBeLessThan(1_500);
    } finally {
      await db.close();
      await hung.close();
    }
  });
});
