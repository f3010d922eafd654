import { randomBytes } from 'node:crypto';
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { createLogger } from '@app/shared/platform/logger';
import { migrate, schemaOf } from '@app/shared/platform/migrate';
import { checkUniqueWithinOwner, resourceEngineMigrations } from '@app/shared/resource/migrations';

/** The resource engine's migrations, on a schema of their own in the test MySQL (docs/testing.md). */
let databaseUrl: string;
const directories: string[] = [];
const testLogger = createLogger('test', 'silent');

/** A connection to the test MySQL server, no schema chosen. */
const server = () => {
  const url = new URL(process.env.TEST_MYSQL_URL!);
  url.pathname = '/';
  return mysql.createConnection(url.toString());
};

async function tablesAndVersions(): Promise<{ tables: string[]; versions: string[] }> {
  const connection = await server();
  try {
    const schema = schemaOf(databaseUrl);
    const [tables] = await connection.query<mysql.RowDataPacket[]>('SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name', [schema]);
    const [versions] = await connection.query<mysql.RowDataPacket[]>(`SELECT version FROM \`${schema}\`.schema_migrations ORDER BY version`);
    return { tables: tables.map((row) => row.name as string), versions: versions.map((row) => row.version as string) };
  } finally {
    await connection.end();
  }
}

beforeEach(() => {
  const url = new URL(process.env.TEST_MYSQL_URL!);
  url.pathname = `/t_${randomBytes(5).toString('hex')}_engine_migrations`;
  databaseUrl = url.toString();
});

afterEach(async () => {
  const connection = await server();
  await connection.query(`DROP DATABASE IF EXISTS \`${schemaOf(databaseUrl)}\``);
  await connection.end();
  await Promise.all(directories.splice(0).map((directory) => rm(directory, { recursive: true, force: true })));
});

describe("the resource engine's migrations", () => {
  it('make the idempotency table, recorded under versions of their own', async () => {
    const applied = await migrate({ databaseUrl, sources: [resourceEngineMigrations], logger: testLogger });
    expect(applied).toEqual(['resource-engine/0001_create_idempotency_keys.sql', 'resource-engine/0002_bound_idempotency_keys_per_caller.sql']);
    expect(await tablesAndVersions()).toEqual({ tables: ['idempotency_keys', 'schema_migrations'], versions: applied });
  });

  it("apply nothing to a schema that recorded them as a service's 0002 and 0003", async () => {
    // The old layout: the same files in the service's own folder, under the names it gave them.
    const old = await mkdtemp(path.join(os.tmpdir(), 'old-layout-'));
    directories.push(old);
    for (const [file, formerVersion] of Object.entries(resourceEngineMigrations.formerVersions ?? {})) {
      await copyFile(path.join(resourceEngineMigrations.directory, file), path.join(old, formerVersion));
    }
    expect(await migrate({ databaseUrl, sources: [{ directory: old }], logger: testLogger })).toEqual(['0002_create_idempotency_keys.sql', '0003_bound_idempotency_keys_per_caller.sql']);
    const before = await tablesAndVersions();

    expect(await migrate({ databaseUrl, sources: [resourceEngineMigrations], logger: testLogger })).toEqual([]);
    expect(await tablesAndVersions()).toEqual(before);
  });
});

describe('checkUniqueWithinOwner', () => {
  const serviceMigrations = (workspace: string) => path.join(import.meta.dirname, '..', '..', workspace, 'migrations');

  /** A folder holding the first `count` migrations of `workspace`. */
  async function firstMigrations(workspace: string, count: number): Promise<string> {
    const folder = await mkdtemp(path.join(os.tmpdir(), 'migrations-'));
    directories.push(folder);
    for (const file of (await readdir(serviceMigrations(workspace))).sort().slice(0, count)) await copyFile(path.join(serviceMigrations(workspace), file), path.join(folder, file));
    return folder;
  }

  it('accepts the users table, whose email is unique within its owner, for "all"', async () => {
    await migrate({ databaseUrl, sources: [resourceEngineMigrations, { directory: serviceMigrations('users-service') }], logger: testLogger });
    await expect(checkUniqueWithinOwner(databaseUrl, 'all')).resolves.toBeUndefined();
  });

  it('refuses "all" for a unique index that does not lead with owner_key, naming it; accepts it for the other ownerships', async () => {
    await migrate({ databaseUrl, sources: [resourceEngineMigrations, { directory: await firstMigrations('users-service', 3) }], logger: testLogger });
    await expect(checkUniqueWithinOwner(databaseUrl, 'all')).rejects.toThrow('add a migration for users.uq_users_email (email_lower)');
    for (const ownership of ['none', 'writes'] as const) await expect(checkUniqueWithinOwner(databaseUrl, ownership)).resolves.toBeUndefined();
  });
});
