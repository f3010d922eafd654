import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import mysql from 'mysql2/promise';
import type { Logger } from './logger.js';

const MIGRATION_FILE = /^\d{4}_[a-z0-9_]+\.sql$/;
const SCHEMA_NAME = /^[A-Za-z0-9_]{1,64}$/;
const LOCK_WAIT_SECONDS = 60;

/** The schema (database) a `mysql://` URL names. */
export function schemaOf(databaseUrl: string): string {
  const schema = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
  if (!SCHEMA_NAME.test(schema)) throw new Error(`DATABASE_URL must name a schema of A-Z a-z 0-9 _ (got "${schema}")`);
  return schema;
}

/**
 * Applies the versioned SQL files of `directory` that the schema's `schema_migrations` table does
 * not record yet, in name order. Creates the schema when missing (if the user may). A MySQL named
 * lock serialises replicas that start together; a changed, already-applied file is an error.
 */
export async function migrate(options: { databaseUrl: string; directory: string; logger: Logger }): Promise<string[]> {
  const { databaseUrl, directory, logger } = options;
  const schema = schemaOf(databaseUrl);
  const server = new URL(databaseUrl);
  server.pathname = '/';
  const connection = await mysql.createConnection({ uri: server.toString(), multipleStatements: true, connectTimeout: 5_000 });
  try {
    await connection.query(
      `CREATE DATABASE IF NOT EXISTS \`${schema}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
    ).catch((error: { code?: string }) => {
      // A user without CREATE rights works on a schema an administrator made: USE says if it is missing.
      if (error.code !== 'ER_DBACCESS_DENIED_ERROR' && error.code !== 'ER_ACCESS_DENIED_ERROR') throw error;
    });
    await connection.query(`USE \`${schema}\``);
    const lock = `migrate:${schema}`;
    const [[granted]] = await connection.query<mysql.RowDataPacket[]>('SELECT GET_LOCK(?, ?) AS ok', [lock, LOCK_WAIT_SECONDS]);
    if (granted?.ok !== 1) throw new Error(`could not take the migration lock "${lock}" within ${LOCK_WAIT_SECONDS}s`);
    try {
      await connection.query(
        `CREATE TABLE IF NOT EXISTS schema_migrations (
           version VARCHAR(255) NOT NULL PRIMARY KEY,
           checksum CHAR(64) NOT NULL,
           applied_at DATETIME(3) NOT NULL
         ) ENGINE=InnoDB`,
      );
      const [rows] = await connection.query<mysql.RowDataPacket[]>('SELECT version, checksum FROM schema_migrations');
      const applied = new Map(rows.map((row) => [row.version as string, row.checksum as string]));
      const files = (await readdir(directory)).filter((name) => name.endsWith('.sql')).sort();
      const misnamed = files.filter((name) => !MIGRATION_FILE.test(name));
      if (misnamed.length > 0) throw new Error(`migration files must be named NNNN_lower_case.sql: ${misnamed.join(', ')}`);
      const newlyApplied: string[] = [];
      for (const file of files) {
        const sql = await readFile(path.join(directory, file), 'utf8');
        const checksum = createHash('sha256').update(sql).digest('hex');
        const known = applied.get(file);
        if (known !== undefined) {
          if (known !== checksum) throw new Error(`migration ${file} was changed after it was applied to ${schema}`);
          continue;
        }
        logger.info({ schema, migration: file }, 'applying migration');
        await connection.query(sql);
        await connection.query('INSERT INTO schema_migrations (version, checksum, applied_at) VALUES (?, ?, ?)', [file, checksum, new Date()]);
        newlyApplied.push(file);
      }
      logger.info({ schema, applied: newlyApplied.length, total: files.length }, 'schema is up to date');
      return newlyApplied;
    } finally {
      await connection.query('SELECT RELEASE_LOCK(?)', [lock]);
    }
  } finally {
    await connection.end();
  }
}
