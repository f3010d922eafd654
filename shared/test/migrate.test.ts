import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { migrate, schemaOf, type MigrationSource } from '@app/shared/platform/migrate';
import { dropSchema, testLogger, throwawayDatabaseUrl } from '../../test/support/stack.js';

/**
 * Migrations that fail when applied twice: a CREATE TABLE without IF NOT EXISTS, and an INSERT
 * into a primary key. 0003 needs 0002's table, so they only work in name order.
 */
const MIGRATIONS = {
  '0001_create_widgets.sql': 'CREATE TABLE widgets (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL) ENGINE=InnoDB;',
  '0002_create_log.sql': 'CREATE TABLE log (step INT NOT NULL PRIMARY KEY, what VARCHAR(40) NOT NULL) ENGINE=InnoDB;',
  '0003_seed.sql': "INSERT INTO widgets VALUES (1, 'first');\nINSERT INTO log VALUES (3, 'seeded');",
};

let directory: string;
let databaseUrl: string;

async function writeMigrations(files: Record<string, string>): Promise<void> {
  for (const [name, sql] of Object.entries(files)) await writeFile(path.join(directory, name), sql);
}

const run = () => migrate({ databaseUrl, sources: [{ directory }], logger: testLogger });

/** Rows of `sql`, run on the server of the test schema (`?` values bound). */
async function query(sql: string, values: unknown[] = []): Promise<mysql.RowDataPacket[]> {
  const server = new URL(databaseUrl);
  server.pathname = '/';
  const connection = await mysql.createConnection(server.toString());
  try {
    const [rows] = await connection.query<mysql.RowDataPacket[]>(sql, values);
    return rows;
  } finally {
    await connection.end();
  }
}

const schema = () => schemaOf(databaseUrl);
const appliedVersions = async () =>
  (await query(`SELECT version FROM \`${schema()}\`.schema_migrations ORDER BY version`)).map((row) => row.version as string);

describe('migrate', () => {
  beforeEach(async () => {
    directory = await mkdtemp(path.join(os.tmpdir(), 'migrations-'));
    databaseUrl = throwawayDatabaseUrl('migrate');
  });

  afterEach(async () => {
    await dropSchema(databaseUrl);
    await rm(directory, { recursive: true, force: true });
  });

  it('creates the schema when it is missing and applies every migration', async () => {
    await writeMigrations(MIGRATIONS);
    expect(await query('SELECT 1 FROM information_schema.schemata WHERE schema_name = ?', [schema()])).toHaveLength(0);

    expect(await run()).toEqual(Object.keys(MIGRATIONS));

    expect(await query('SELECT 1 FROM information_schema.schemata WHERE schema_name = ?', [schema()])).toHaveLength(1);
    expect(await appliedVersions()).toEqual(Object.keys(MIGRATIONS));
    expect(await query(`SELECT id, name FROM \`${schema()}\`.widgets`)).toEqual([{ id: 1, name: 'first' }]);
  });

  it('applies each migration exactly once when 5 replicas migrate at the same time', async () => {
    await writeMigrations(MIGRATIONS);

    const results = await Promise.all(Array.from({ length: 5 }, () => run()));

    expect(results.flat().sort()).toEqual(Object.keys(MIGRATIONS));
    expect(results.filter((applied) => applied.length > 0)).toHaveLength(1);
    expect(await appliedVersions()).toEqual(Object.keys(MIGRATIONS));
    expect(await query(`SELECT step FROM \`${schema()}\`.log`)).toEqual([{ step: 3 }]);
  });

  it('applies nothing when run again', async () => {
    await writeMigrations(MIGRATIONS);
    await run();

    expect(await run()).toEqual([]);

    expect(await appliedVersions()).toEqual(Object.keys(MIGRATIONS));
    expect(await query(`SELECT id FROM \`${schema()}\`.widgets`)).toHaveLength(1);
  });

  it('applies only the migrations added since the last run', async () => {
    await writeMigrations({ '0001_create_widgets.sql': MIGRATIONS['0001_create_widgets.sql'] });
    expect(await run()).toEqual(['0001_create_widgets.sql']);

    await writeMigrations(MIGRATIONS);
    expect(await run()).toEqual(['0002_create_log.sql', '0003_seed.sql']);
    expect(await appliedVersions()).toEqual(Object.keys(MIGRATIONS));
  });

  it('applies files in name order, whatever order they were written in', async () => {
    const reversed = Object.entries(MIGRATIONS).reverse();
    for (const [name, sql] of reversed) await writeFile(path.join(directory, name), sql);

    expect(await run()).toEqual(Object.keys(MIGRATIONS));
    expect(await query(`SELECT what FROM \`${schema()}\`.log`)).toEqual([{ what: 'seeded' }]);
  });

  it('orders by the whole name, so 0010 comes after 0002', async () => {
    await writeMigrations({
      '0010_add_column.sql': 'ALTER TABLE widgets ADD COLUMN colour VARCHAR(10) NULL;',
      '0002_create_widgets.sql': MIGRATIONS['0001_create_widgets.sql'],
    });
    expect(await run()).toEqual(['0002_create_widgets.sql', '0010_add_column.sql']);
  });

  it('ignores files that are not migrations', async () => {
    await writeMigrations({ ...MIGRATIONS, 'README.md': 'not SQL', '0004_notes.txt': 'not SQL either' });
    expect(await run()).toEqual(Object.keys(MIGRATIONS));
  });

  it('throws, naming the file, when a .sql file is not named like a migration, and applies nothing', async () => {
    await writeMigrations({ ...MIGRATIONS, '0004_Add-Col.sql': 'ALTER TABLE nothing' });
    await expect(run()).rejects.toThrow('0004_Add-Col.sql');
    expect(await appliedVersions()).toEqual([]);
  });

  it('throws, naming the file, when an applied migration was changed, and applies nothing after it', async () => {
    await writeMigrations(MIGRATIONS);
    await run();
    await writeMigrations({
      '0002_create_log.sql': `${MIGRATIONS['0002_create_log.sql']}\n-- edited after the fact`,
      '0004_more.sql': 'CREATE TABLE more_widgets (id INT NOT NULL PRIMARY KEY);',
    });

    await expect(run()).rejects.toThrow(/0002_create_log\.sql was changed/);

    expect(await appliedVersions()).toEqual(Object.keys(MIGRATIONS));
    expect(await query('SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = ?', [schema(), 'more_widgets'])).toHaveLength(0);
  });

  it('does not record a migration that fails, and applies it once it is fixed', async () => {
    await writeMigrations({ ...MIGRATIONS, '0004_broken.sql': 'CREATE TABLE broken (id INT NOT NULL PRIMARY KEY' });
    await expect(run()).rejects.toThrow();
    expect(await appliedVersions()).toEqual(Object.keys(MIGRATIONS));

    await writeMigrations({ '0004_broken.sql': 'CREATE TABLE broken (id INT NOT NULL PRIMARY KEY);' });
    expect(await run()).toEqual(['0004_broken.sql']);
  });

  it('releases its lock when a migration fails', async () => {
    await writeMigrations({ '0001_broken.sql': 'THIS IS NOT SQL;' });
    await expect(run()).rejects.toThrow();
    const [lock] = await query('SELECT IS_FREE_LOCK(?) AS free', [`migrate:${schema()}`]);
    expect(lock?.free).toBe(1);
  });
});

describe('migrate from several folders', () => {
  /** A folder whose files apply before the service's own, as the resource engine's do. */
  let engineDirectory: string;
  const ENGINE_LOG = 'CREATE TABLE log (step INT NOT NULL PRIMARY KEY, what VARCHAR(40) NOT NULL) ENGINE=InnoDB;';
  const engine = (formerVersions?: Record<string, string>): MigrationSource => ({ directory: engineDirectory, versionPrefix: 'engine/', formerVersions });
  const runBoth = (formerVersions?: Record<string, string>) => migrate({ databaseUrl, sources: [engine(formerVersions), { directory }], logger: testLogger });

  beforeEach(async () => {
    directory = await mkdtemp(path.join(os.tmpdir(), 'migrations-'));
    engineDirectory = await mkdtemp(path.join(os.tmpdir(), 'engine-migrations-'));
    databaseUrl = throwawayDatabaseUrl('migrate');
  });

  afterEach(async () => {
    await dropSchema(databaseUrl);
    await rm(directory, { recursive: true, force: true });
    await rm(engineDirectory, { recursive: true, force: true });
  });

  it('applies the folders one after another, each in name order, each version under its prefix', async () => {
    // Numbered after the service's files, which need its table: the folders' order puts it first, not its number.
    await writeFile(path.join(engineDirectory, '0009_create_log.sql'), ENGINE_LOG);
    await writeMigrations({ '0001_create_widgets.sql': MIGRATIONS['0001_create_widgets.sql'], '0002_seed.sql': MIGRATIONS['0003_seed.sql'] });

    expect(await runBoth()).toEqual(['engine/0009_create_log.sql', '0001_create_widgets.sql', '0002_seed.sql']);

    expect(await appliedVersions()).toEqual(['0001_create_widgets.sql', '0002_seed.sql', 'engine/0009_create_log.sql']);
    expect(await runBoth()).toEqual([]);
  });

  it('reads a file recorded under its former version as applied, and leaves its record as it was', async () => {
    // The old layout: the engine's table as the service's own 0002.
    await writeMigrations({ '0001_create_widgets.sql': MIGRATIONS['0001_create_widgets.sql'], '0002_create_log.sql': ENGINE_LOG });
    await run();
    const before = await query(`SELECT version, checksum, applied_at FROM \`${schema()}\`.schema_migrations ORDER BY version`);
    // The new one: the file moved to the engine's folder, and the service adds its own 0002.
    await rm(path.join(directory, '0002_create_log.sql'));
    await writeFile(path.join(engineDirectory, '0001_create_log.sql'), ENGINE_LOG);
    await writeMigrations({ '0002_seed.sql': MIGRATIONS['0003_seed.sql'] });

    expect(await runBoth({ '0001_create_log.sql': '0002_create_log.sql' })).toEqual(['0002_seed.sql']);

    const after = await query(`SELECT version, checksum, applied_at FROM \`${schema()}\`.schema_migrations WHERE version <> '0002_seed.sql' ORDER BY version`);
    expect(after).toEqual(before);
  });

  it('throws when a file recorded under its former version was changed since', async () => {
    await writeMigrations({ '0002_create_log.sql': ENGINE_LOG });
    await run();
    await rm(path.join(directory, '0002_create_log.sql'));
    await writeFile(path.join(engineDirectory, '0001_create_log.sql'), `${ENGINE_LOG}\n-- edited after the fact`);

    await expect(runBoth({ '0001_create_log.sql': '0002_create_log.sql' })).rejects.toThrow(/engine\/0001_create_log\.sql was changed/);
  });

  it('throws, naming both files, when a folder still holds a file another now records under its former version', async () => {
    await writeFile(path.join(engineDirectory, '0001_create_log.sql'), ENGINE_LOG);
    await writeMigrations({ '0002_create_log.sql': ENGINE_LOG });

    const failure = runBoth({ '0001_create_log.sql': '0002_create_log.sql' });

    await expect(failure).rejects.toThrow('would both be recorded as 0002_create_log.sql');
    await expect(failure).rejects.toThrow(path.join(engineDirectory, '0001_create_log.sql'));
    await expect(failure).rejects.toThrow(path.join(directory, '0002_create_log.sql'));
    expect(await appliedVersions()).toEqual([]);
  });

  it('throws when a former version names a file its folder does not hold', async () => {
    await writeFile(path.join(engineDirectory, '0001_create_log.sql'), ENGINE_LOG);
    await expect(runBoth({ '0001_create_logs.sql': '0002_create_log.sql' })).rejects.toThrow('0001_create_logs.sql');
    expect(await appliedVersions()).toEqual([]);
  });
});

describe('schemaOf', () => {
  it('is the schema a mysql:// URL names', () => {
    expect(schemaOf('mysql://root@127.0.0.1:3306/users')).toBe('users');
  });

  it.each(['mysql://root@127.0.0.1:3306/', 'mysql://root@127.0.0.1:3306/my-schema', 'mysql://root@127.0.0.1:3306/a%60b', 'mysql://h/a/b'])(
    'refuses %s, which does not name a plain schema',
    (url) => {
      expect(() => schemaOf(url)).toThrow(/DATABASE_URL must name a schema/);
    },
  );
});
