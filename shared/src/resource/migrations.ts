import { fileURLToPath } from 'node:url';
import mysql, { type RowDataPacket } from 'mysql2/promise';
import { schemaOf, type MigrationSource } from '../platform/migrate.js';
import { ownershipPolicy, type Ownership } from '../platform/ownership-policy.js';

/**
 * The resource engine's tables (its idempotency keys), in shared/migrations/: migrated into every
 * service's schema before the service's own, under versions of their own. Each service once held
 * copies as its 0002 and 0003, and a schema migrated then records them under those names.
 */
export const resourceEngineMigrations: MigrationSource = {
  directory: fileURLToPath(new URL('../../migrations/', import.meta.url)),
  versionPrefix: 'resource-engine/',
  formerVersions: {
    '0001_create_idempotency_keys.sql': '0002_create_idempotency_keys.sql',
    '0002_bound_idempotency_keys_per_caller.sql': '0003_bound_idempotency_keys_per_caller.sql',
  },
};

/** The column a unique index leads with to be unique within an owner: the owner, or '' for none. */
export const OWNER_KEY_COLUMN = 'owner_key';

/**
 * Throws unless every unique index (but the primary key) of a table with owners in the schema leads
 * with `owner_key`, where the ownership makes a unique field unique within its owner (only owners
 * see their records): a 409 then tells no caller what another owner has (docs/api.md). Checked
 * each time the migrations run (on start, unless MIGRATE_ON_START=false, and by `npm run migrate`).
 */
export async function checkUniqueWithinOwner(databaseUrl: string, ownership: Ownership): Promise<void> {
  if (!ownershipPolicy(ownership).uniqueWithinOwner) return;
  const connection = await mysql.createConnection({ uri: databaseUrl, connectTimeout: 5_000 });
  const [rows] = await connection.query<RowDataPacket[]>(
    `SELECT s.TABLE_NAME AS tableName, s.INDEX_NAME AS indexName, GROUP_CONCAT(s.COLUMN_NAME ORDER BY s.SEQ_IN_INDEX) AS columnNames
       FROM information_schema.STATISTICS s
       JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = 'owner'
      WHERE s.TABLE_SCHEMA = ? AND s.NON_UNIQUE = 0 AND s.INDEX_NAME <> 'PRIMARY'
      GROUP BY s.TABLE_NAME, s.INDEX_NAME
      ORDER BY s.TABLE_NAME, s.INDEX_NAME`,
    [schemaOf(databaseUrl)],
  ).finally(() => connection.end());
  const global = rows.filter((row) => String(row.columnNames).split(',')[0] !== OWNER_KEY_COLUMN);
  if (global.length === 0) return;
  const named = global.map((row) => `${String(row.tableName)}.${String(row.indexName)} (${String(row.columnNames)})`).join(', ');
  throw new Error(
    `"owner": "${ownership}" needs each unique index to lead with ${OWNER_KEY_COLUMN}, so that a 409 tells no caller what another owner has; add a migration for ${named} (docs/adding-a-service.md)`,
  );
}
