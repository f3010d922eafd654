import { resourceRoutes } from '@app/shared/resource-routes';
import type { UsersService } from '../domain/users.js';

/** `/api/users` (list, create) and `/api/users/{id}` (read, replace, patch, delete). */
export const usersRoutes = (users: UsersService) => resourceRoutes('/api/users', users);
