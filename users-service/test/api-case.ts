import type { ResourceCase } from '../../test/support/resource-case.js';
import { userFilter } from '../src/domain/users.js';

/** Users, for the per-resource suites (test/support/resource-case.ts). */
export const apiCase: ResourceCase = {
  valid: (n) => ({ email: `user${n}@example.com`, name: `User ${n}` }),
  echoed: (body) => body,
  invalid: { body: { email: 'not-an-email', name: '   ' }, paths: ['email', 'name'] },
  required: 'name',
  patch: { body: { name: 'Renamed' }, expected: { name: 'Renamed' } },
  filters: userFilter,
  unique: {
    field: 'email',
    duplicateOf: (body, n) => ({ email: String(body.email).toUpperCase(), name: `Other ${n}` }),
  },
};
