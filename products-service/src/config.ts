import { serviceConfigSchema } from '@app/shared/service';

export const defaults = {
  name: 'products-service',
  defaultPort: 3002,
  defaultDatabaseUrl: 'mysql://root@127.0.0.1:3306/products',
};

/** The environment this process reads (validated at start-up). */
export const configSchema = serviceConfigSchema(defaults);
