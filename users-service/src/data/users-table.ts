import type { TableMapping } from '@app/shared/resource/store';
import type { SeedColumns } from '@app/shared/service';
import type { UserFields, UserFilter } from '../domain/users.js';

export const usersTable: TableMapping<UserFields, UserFilter> = {
  table: 'users',
  columns: ['email', 'name'],
  toRow: (user) => [user.email, user.name],
  fromRow: (row) => ({ email: row.email as string, name: row.name as string }),
  where: (filter) => (filter.email === undefined ? [] : [{ sql: 'email_lower = LOWER(?)', values: [filter.email] }]),
  uniqueIndexes: { uq_users_email: { field: 'email', message: 'is already taken' } },
};

/** Generated rows for `npm run seed`: valid for the API, unique per run. */
export const usersSeed: SeedColumns = { table: 'users', columns: {
  email: "CONCAT('user', n, '.', @tag, '@example.com')",
  name: "CONCAT('User ', n)",
} };
