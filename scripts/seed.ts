/**
 * `npm run seed -- --rows 1000000 [--users URL] [--products URL]`: fills the users and products
 * schemas (the services' default DATABASE_URLs unless given) with generated rows, in SQL: each
 * batch is one INSERT … SELECT over a sequence the server generates, so a million rows take seconds,
 * not a million API calls. Applies the services' migrations first. Rows are added to what is there.
 *
 * Ids are UUIDv7 with increasing time (one millisecond apart, ending now), so they sort like ids
 * the service makes, and a service started afterwards makes larger ones. Every row is valid for
 * the API: unique skus and emails (with a tag of this run, so seeding twice adds more), exact prices.
 */
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { createLogger } from '@app/shared/platform/logger';
import { migrateSchema, type ServiceDefinition } from '@app/shared/service';
import { productsService } from '../products-service/dist/app.js';
import { usersService } from '../users-service/dist/app.js';

/** Rows per INSERT … SELECT: 10^5, the product of five digit tables. */
const BATCH_DIGITS = 5;
const BATCH = 10 ** BATCH_DIGITS;

/** The columns each table gets, as SQL over `n` (the row's number), `at` (its DATETIME(3)) and `tag`. */
const TABLES = {
  products: {
    service: productsService,
    columns: {
      sku: "CONCAT('SEED-', @tag, '-', n)",
      name: "CONCAT('Product ', n)",
      description: "'A seeded product.'",
      price_amount: '(n % 100000) / 100',
      price_currency: "'EUR'",
      stock: 'n % 1000',
    },
  },
  users: {
    service: usersService,
    columns: {
      email: "CONCAT('user', n, '.', @tag, '@example.com')",
      name: "CONCAT('User ', n)",
    },
  },
} satisfies Record<string, { service: ServiceDefinition; columns: Record<string, string> }>;

export type SeededTable = keyof typeof TABLES;

/**
 * A UUIDv7 in 16 bytes from `ms` (48-bit Unix milliseconds) and `n`: version 7, variant 10, the
 * random bits from MD5(n) (deterministic, well spread).
 */
const UUID_V7_SQL = "UNHEX(CONCAT(LPAD(HEX(ms), 12, '0'), '7', SUBSTR(MD5(n), 1, 3), HEX(8 + n % 4), SUBSTR(MD5(n), 4, 15)))";

/** `SELECT n` for n in [start, start + 10^5): five digit tables, cross-joined. */
function sequenceSql(start: number): string {
  const digits = Array.from({ length: 10 }, (_, d) => `SELECT ${d} AS d`).join(' UNION ALL ');
  const tables = Array.from({ length: BATCH_DIGITS }, (_, i) => `(${digits}) d${i}`).join(' CROSS JOIN ');
  const number = Array.from({ length: BATCH_DIGITS }, (_, i) => `d${i}.d * ${10 ** i}`).join(' + ');
  return `SELECT ${start} + ${number} AS n FROM ${tables}`;
}

/** Adds `rows` generated rows to `table` in the schema of `databaseUrl` (migrated first); returns how long it took. */
export async function seed(options: { databaseUrl: string; table: SeededTable; rows: number; log?: (line: string) => void }): Promise<number> {
  const { databaseUrl, table, rows, log = () => undefined } = options;
  const { service, columns } = TABLES[table];
  await migrateSchema(service, databaseUrl, createLogger('seed', 'warn'));
  const started = performance.now();
  const connection = await mysql.createConnection({ uri: databaseUrl });
  try {
    const endMs = Date.now();
    // Timestamps are UTC, as the services read and write them.
    await connection.query("SET time_zone = '+00:00'");
    await connection.query('SET @tag = ?', [endMs.toString(36)]);
    const names = Object.keys(columns).join(', ');
    const values = Object.values(columns).join(', ');
    for (let start = 0; start < rows; start += BATCH) {
      const count = Math.min(BATCH, rows - start);
      // Row n gets millisecond endMs - rows + n: increasing with n, the last one now.
      await connection.query(
        `INSERT INTO ${table} (id, version, created_at, updated_at, ${names})
         SELECT ${UUID_V7_SQL}, 1, at, at, ${values}
         FROM (SELECT n, ms, FROM_UNIXTIME(ms / 1000) AS at
               FROM (SELECT n, ${endMs - rows} + n AS ms FROM (${sequenceSql(start)}) numbers WHERE n < ${start + count}) timed) generated
         ORDER BY n`,
      );
      log(`${table}: ${start + count} of ${rows} rows`);
    }
  } finally {
    await connection.end();
  }
  return performance.now() - started;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rows: { type: 'string', default: '10000' },
      users: { type: 'string', default: usersService.defaultDatabaseUrl },
      products: { type: 'string', default: productsService.defaultDatabaseUrl },
    },
  });
  const rows = Number(values.rows);
  if (!Number.isSafeInteger(rows) || rows < 1) throw new Error(`--rows must be a whole number from 1 (got "${values.rows}")`);
  for (const [table, databaseUrl] of [['users', values.users], ['products', values.products]] as const) {
    const ms = await seed({ databaseUrl, table, rows, log: (line) => process.stdout.write(`\r${line}`) });
    process.stdout.write(`\n${table}: ${rows} rows added to ${new URL(databaseUrl).pathname.slice(1)} in ${(ms / 1000).toFixed(1)} s\n`);
  }
}

if (import.meta.main) await main();
