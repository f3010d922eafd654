import { API_PREFIX } from '@app/shared/platform/services';
import type { IdempotencyStore } from '@app/shared/resource/idempotency';
import { resourceEndpoints, resourceRoutes } from '@app/shared/resource/routes';
import { defaults } from '../config.js';
import { usersResource, type UsersService } from '../domain/users.js';

const path = `${API_PREFIX}/users`;

/** `/api/users` (list, create) and `/api/users/{id}` (read, replace, patch, delete). */
export const usersRoutes = (users: UsersService, idempotency: IdempotencyStore, bodyLimitBytes?: number) => resourceRoutes(path, users, idempotency, defaults.ownership, bodyLimitBytes);

/** The same declaration, for the description. */
export const usersApi = resourceEndpoints(path, usersResource, defaults.ownership, defaults.bodyLimitBytes);
