import { filters, type FilterValues } from '@app/shared/resource/filters';
import { ResourceService, type ResourceDefinition, type ResourceStore } from '@app/shared/resource/rules';
import { text } from '@app/shared/platform/validation';
import { z } from 'zod';

/**
 * zod's email rule, with host names as RFC 1035 has them: no label ends with `-`. zod's own
 * pattern lets `a@b-.example` through, which the API description's `format: email` (and mail
 * servers) refuse; the hostile-input suite found it.
 */
const EMAIL = /^(?:[A-Za-z0-9_'+-]+\.)*[A-Za-z0-9_'+-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}$/;

export const userFields = z.strictObject({
  email: z
    .email({ pattern: EMAIL, error: (issue) => (issue.code === 'invalid_format' ? 'must be a valid email address' : undefined) })
    .max(254, 'must be at most 254 characters')
    .meta({ description: 'Unique, ignoring case.' }),
  name: text(1, 200, { trim: true }),
});

export type UserFields = z.infer<typeof userFields>;

/** `?email=`: exact, ignoring case (the data layer compares lower-case copies). */
export const userFilter = {
  email: filters.exact('email', z.string().max(254, 'must be at most 254 characters').meta({ description: 'Only the user with this email, ignoring case.' })),
};

export type UserFilter = FilterValues<typeof userFilter>;

export type UsersService = ResourceService<UserFields, UserFilter>;

export const usersResource: ResourceDefinition<UserFields, typeof userFilter> = {
  name: 'user',
  fields: userFields,
  filter: userFilter,
  example: { email: 'ada@example.com', name: 'Ada Lovelace' },
};

export function createUsersService(store: ResourceStore<UserFields, UserFilter>): UsersService {
  return new ResourceService(usersResource, store);
}
