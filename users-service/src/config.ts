import { serviceConfigSchema } from '@app/shared/service';

export const defaults = {
  name: 'users-service',
  defaultPort: 3001,
  defaultDatabaseUrl: 'mysql://root@127.0.0.1:3306/users',
};

/** The environment this process reads (validated at start-up). */
export const configSchema = serviceConfigSchema(defaults);
