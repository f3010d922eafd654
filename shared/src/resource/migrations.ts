import { fileURLToPath } from 'node:url';
import type { MigrationSource } from '../platform/migrate.js';

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
