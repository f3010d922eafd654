/**
 * `npm run seed -- --rows 1000000 [--users URL] [--products URL] …`: fills the schema of every
 * service in services.json that says how (its definition's `seed`), at the service's default
 * DATABASE_URL unless given, with generated rows, in SQL: each batch is one INSERT … SELECT over a
 * sequence the server generates, so a million rows take seconds, not a million API calls. Applies
 * the services' migrations first. Rows are added to what is there.
 *
 * Ids are UUIDv7 with increasing time (one millisecond apart, ending now), so they sort like ids
 * the service makes, and a service started afterwards makes larger ones. Every row is valid for
 * the API: each service's columns make unique values with a tag of this run, so seeding twice adds more.
 */
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { createLogger } from '@app/shared/platform/logger';
import { migrateSchema, type ServiceDefinition } from '@app/shared/service';
import { serviceModules } from '../tools/services.ts';

/** Rows per INSERT … SELECT: 10^5, the product of five digit tables. */
const BATCH_DIGITS = 5;
const BATCH = 10 ** BATCH_DIGITS;

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
export async function seed(options: { databaseUrl: string; service: ServiceDefinition; rows: number; log?: (line: string) => void }): Promise<number> {
  const { databaseUrl, service, rows, log = () => undefined } = options;
  if (!service.seed) throw new Error(`${service.name} does not say how to seed it (its definition's seed)`);
  const { table, columns } = service.seed;
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
  const seeded = (await serviceModules()).filter(({ service }) => service.seed);
  const options: Record<string, { type: 'string'; default: string }> = { rows: { type: 'string', default: '10000' } };
  for (const { entry, service } of seeded) options[entry.name] = { type: 'string', default: service.defaultDatabaseUrl };
  const values = parseArgs({ options }).values as Record<string, string>;
  const rows = Number(values.rows);
  if (!Number.isSafeInteger(rows) || rows < 1) throw new Error(`--rows must be a whole number from 1 (got "${values.rows}")`);
  for (const { entry, service } of seeded) {
    const databaseUrl = values[entry.name]!;
    const ms = await seed({ databaseUrl, service, rows, log: (line) => process.stdout.write(`\r${line}`) });
    process.stdout.write(`\n${service.seed?.table}: ${rows} rows added to ${new URL(databaseUrl).pathname.slice(1)} in ${(ms / 1000).toFixed(1)} s\n`);
  }
}

if (import.meta.main) await main();
