import { tableOf } from '@app/shared/resource/store';
import type { SeedColumns } from '@app/shared/service';
import { usersResource } from '../domain/users.js';

export const usersTable = tableOf(usersResource, {
  table: 'users',
  // The stored lower-case copy (indexed), against the value lowered by MySQL as the copy was.
  conditions: { email: 'email_lower = LOWER(?)' },
  uniqueIndexes: { uq_users_email: { field: 'email', message: 'is already taken' } },
});

/** Generated rows for `npm run seed`: valid for the API, unique per run. */
export const usersSeed: SeedColumns = { table: 'users', columns: {
  email: "CONCAT('user', n, '.', @tag, '@example.com')",
  name: "CONCAT('User ', n)",
} };
