import type { IdempotencyStore } from '@app/shared/resource/idempotency';
import { resourceApi } from '@app/shared/api-description/resource-openapi';
import { resourceRoutes } from '@app/shared/resource/routes';
import { usersResource, type UsersService } from '../domain/users.js';

const path = '/api/users';

/** `/api/users` (list, create) and `/api/users/{id}` (read, replace, patch, delete). */
export const usersRoutes = (users: UsersService, idempotency: IdempotencyStore) => resourceRoutes(path, users, idempotency);

/** The description of what `usersRoutes` serves. */
export const usersApi = resourceApi(path, usersResource);
