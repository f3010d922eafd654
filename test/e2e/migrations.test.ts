/**
 * Each service's schema as the layout before shared/migrations/ left it (each service held copies
 * of the resource engine's migrations as its 0002 and 0003), migrated by today's code: nothing is
 * applied again and nothing changes. A new schema gets the same tables.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import { schemaOf } from '@app/shared/platform/migrate';
import { migrateSchema, type ServiceDefinition } from '@app/shared/service';
import { serviceModules } from '../../tools/services.js';
import { testLogger, throwawayDatabases } from '../support/stack.js';

/**
 * What the old layout recorded for the engine's files: the versions they had as a service's files,
 * and the checksums of their content then (which must never change: old schemas hold these).
 */
const OLD_LAYOUT_ENGINE_ROWS = [
  { file: '0001_create_idempotency_keys.sql', version: '0002_create_idempotency_keys.sql', checksum: '5d646629354afa4b21c84705a3433bfe7928107a6fbf2df86412a6f1e67284f1' },
  { file: '0002_bound_idempotency_keys_per_caller.sql', version: '0003_bound_idempotency_keys_per_caller.sql', checksum: 'e0bd49e5f9c605e574828ce2152cbc74a7bdfb7617bde86c9a192a492140242a' },
];
const ENGINE_MIGRATIONS = new URL('../../shared/migrations/', import.meta.url);

const modules = await serviceModules('src');

const databaseUrl = throwawayDatabases();

async function withConnection<T>(databaseUrl: string, use: (connection: mysql.Connection) => Promise<T>): Promise<T> {
  const connection = await mysql.createConnection({ uri: databaseUrl, multipleStatements: true });
  try {
    return await use(connection);
  } finally {
    await connection.end();
  }
}

/**
 * Migrates the schema as the old code did: one folder, the service's own files and the engine's
 * copies, in name order, each recorded under its file name with its checksum.
 */
async function migrateAsTheOldLayoutDid(service: ServiceDefinition, databaseUrl: string): Promise<void> {
  const ownDirectory = fileURLToPath(service.migrations);
  const own = await Promise.all(
    (await readdir(ownDirectory)).filter((file) => file.endsWith('.sql')).map(async (file) => {
      const sql = await readFile(path.join(ownDirectory, file), 'utf8');
      return { version: file, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    }),
  );
  const engine = await Promise.all(OLD_LAYOUT_ENGINE_ROWS.map(async ({ file, version, checksum }) => ({ version, checksum, sql: await readFile(new URL(file, ENGINE_MIGRATIONS), 'utf8') })));
  const server = new URL(databaseUrl);
  server.pathname = '/';
  const schema = schemaOf(databaseUrl);
  await withConnection(server.toString(), (connection) => connection.query(`CREATE DATABASE \`${schema}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`));
  await withConnection(databaseUrl, async (connection) => {
    await connection.query('CREATE TABLE schema_migrations (version VARCHAR(255) NOT NULL PRIMARY KEY, checksum CHAR(64) NOT NULL, applied_at DATETIME(3) NOT NULL) ENGINE=InnoDB');
    for (const { version, sql, checksum } of [...own, ...engine].sort((a, b) => a.version.localeCompare(b.version))) {
      await connection.query(sql);
      await connection.query('INSERT INTO schema_migrations VALUES (?, ?, ?)', [version, checksum, new Date()]);
    }
  });
}

/** Every table's CREATE TABLE (its columns, indexes, charset), and the migrations it records. */
async function schemaState(databaseUrl: string): Promise<{ tables: Record<string, string>; migrations: mysql.RowDataPacket[] }> {
  return withConnection(databaseUrl, async (connection) => {
    const [names] = await connection.query<mysql.RowDataPacket[]>('SELECT table_name AS name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name');
    const tables: Record<string, string> = {};
    for (const { name } of names) {
      const [[created]] = await connection.query<mysql.RowDataPacket[]>(`SHOW CREATE TABLE \`${name as string}\``);
      tables[name as string] = created!['Create Table'] as string;
    }
    const [migrations] = await connection.query<mysql.RowDataPacket[]>('SELECT version, checksum, applied_at FROM schema_migrations ORDER BY version');
    return { tables, migrations };
  });
}

describe.each(modules.map(({ entry, service }) => ({ name: entry.workspace, service })))('$name', ({ service }) => {
  it('migrates a schema of the old layout with nothing applied again and no table or record changed', async () => {
    const url = databaseUrl('old_layout');
    await migrateAsTheOldLayoutDid(service, url);
    const before = await schemaState(url);
    expect(Object.keys(before.tables)).toEqual(expect.arrayContaining(['idempotency_keys', 'schema_migrations']));

    expect(await migrateSchema(service, url, testLogger)).toEqual([]);

    expect(await schemaState(url)).toEqual(before);
  });

  it('gives a new schema the tables the old layout gave, the engine\'s first', async () => {
    const oldUrl = databaseUrl('old_layout');
    await migrateAsTheOldLayoutDid(service, oldUrl);
    const newUrl = databaseUrl('new_layout');

    const applied = await migrateSchema(service, newUrl, testLogger);

    expect(applied.slice(0, OLD_LAYOUT_ENGINE_ROWS.length)).toEqual(OLD_LAYOUT_ENGINE_ROWS.map(({ file }) => `resource-engine/${file}`));
    expect(applied.length).toBeGreaterThan(OLD_LAYOUT_ENGINE_ROWS.length);
    expect((await schemaState(newUrl)).tables).toEqual((await schemaState(oldUrl)).tables);
  });
});
