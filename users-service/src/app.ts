import { MySqlStore } from '@app/shared/resource/store';
import { createServiceApp, type ServiceDefinition, type ServiceDependencies } from '@app/shared/service';
import { defaults } from './config.js';
import { usersSeed, usersTable } from './data/users-table.js';
import { createUsersService } from './domain/users.js';
import { usersApi, usersRoutes } from './routes/users.js';

export const service: ServiceDefinition = {
  ...defaults,
  migrations: new URL('../migrations/', import.meta.url),
  seed: usersSeed,
  api: usersApi,
  routes: (db, idempotency, bodyLimitBytes) => usersRoutes(createUsersService(new MySqlStore(db, usersTable)), idempotency, bodyLimitBytes),
};

/** The users API as an express app, from its dependencies. It does not listen. */
export const createApp = (dependencies: ServiceDependencies) => createServiceApp(service, dependencies);
