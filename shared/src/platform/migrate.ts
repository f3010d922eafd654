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

/** A folder of migrations, applied in name order. */
export interface MigrationSource {
  directory: string;
  /** Put before each file name to make its version in `schema_migrations`: '' (the default) for a service's own. */
  versionPrefix?: string;
  /** The version a file of this folder was recorded under before it moved here, by file name. */
  formerVersions?: Readonly<Record<string, string>>;
}

interface Migration {
  version: string;
  formerVersion: string | undefined;
  path: string;
  sql: string;
  checksum: string;
}

/**
 * The migrations of `sources`, in the order they apply. A version is its folder's prefix and its
 * file name, so two folders never share one however each numbers its files, and a new file in one
 * never renumbers the other's: the order is the sources' order, then name order within each.
 */
async function readMigrations(sources: MigrationSource[]): Promise<Migration[]> {
  const migrations: Migration[] = [];
  for (const { directory, versionPrefix = '', formerVersions = {} } of sources) {
    const files = (await readdir(directory)).filter((name) => name.endsWith('.sql')).sort();
    const misnamed = files.filter((name) => !MIGRATION_FILE.test(name));
    if (misnamed.length > 0) throw new Error(`migration files must be named NNNN_lower_case.sql: ${misnamed.join(', ')}`);
    const strays = Object.keys(formerVersions).filter((file) => !files.includes(file));
    if (strays.length > 0) throw new Error(`former versions name files ${directory} does not hold: ${strays.join(', ')}`);
    for (const file of files) {
      const sql = await readFile(path.join(directory, file), 'utf8');
      const checksum = createHash('sha256').update(sql).digest('hex');
      migrations.push({ version: versionPrefix + file, formerVersion: formerVersions[file], path: path.join(directory, file), sql, checksum });
    }
  }
  const claimedBy = new Map<string, string>();
  for (const migration of migrations) {
    for (const version of [migration.version, migration.formerVersion]) {
      if (version === undefined) continue;
      const other = claimedBy.get(version);
      if (other !== undefined) throw new Error(`migrations ${other} and ${migration.path} would both be recorded as ${version}`);
      claimedBy.set(version, migration.path);
    }
  }
  return migrations;
}

/**
 * Applies the migrations of `sources` that the schema's `schema_migrations` table does not record
 * yet (under their version or their former one), in order; returns the versions it applied.
 * Creates the schema when missing (if the user may). A MySQL named lock serialises replicas that
 * start together; a changed, already-applied file is an error.
 */
export async function migrate(options: { databaseUrl: string; sources: MigrationSource[]; logger: Logger }): Promise<string[]> {
  const { databaseUrl, sources, logger } = options;
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
      return await applyPending(connection, schema, sources, logger);
    } finally {
      await connection.query('SELECT RELEASE_LOCK(?)', [lock]);
    }
  } finally {
    await connection.end();
  }
}

async function applyPending(connection: mysql.Connection, schema: string, sources: MigrationSource[], logger: Logger): Promise<string[]> {
  await connection.query(
    `CREATE TABLE IF NOT EXISTS schema_migrations (
       version VARCHAR(255) NOT NULL PRIMARY KEY,
       checksum CHAR(64) NOT NULL,
       applied_at DATETIME(3) NOT NULL
     ) ENGINE=InnoDB`,
  );
  const [rows] = await connection.query<mysql.RowDataPacket[]>('SELECT version, checksum FROM schema_migrations');
  const applied = new Map(rows.map((row) => [row.version as string, row.checksum as string]));
  const migrations = await readMigrations(sources);
  const newlyApplied: string[] = [];
  for (const { version, formerVersion, sql, checksum } of migrations) {
    // The row of a file that moved keeps its former version, so a replica of the old layout still reads it as applied.
    const known = applied.get(version) ?? (formerVersion === undefined ? undefined : applied.get(formerVersion));
    if (known !== undefined) {
      if (known !== checksum) throw new Error(`migration ${version} was changed after it was applied to ${schema}`);
      continue;
    }
    logger.info({ schema, migration: version }, 'applying migration');
    await connection.query(sql);
    await connection.query('INSERT INTO schema_migrations (version, checksum, applied_at) VALUES (?, ?, ?)', [version, checksum, new Date()]);
    newlyApplied.push(version);
  }
  logger.info({ schema, applied: newlyApplied.length, total: migrations.length }, 'schema is up to date');
  return newlyApplied;
}
