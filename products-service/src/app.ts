import { MySqlStore } from '@app/shared/resource/store';
import { createServiceApp, type ServiceDefinition, type ServiceDependencies } from '@app/shared/service';
import { defaults } from './config.js';
import { productsSeed, productsTable } from './data/products-table.js';
import { createProductsService } from './domain/products.js';
import { productsApi, productsRoutes } from './routes/products.js';

export const service: ServiceDefinition = {
  ...defaults,
  migrations: new URL('../migrations/', import.meta.url),
  seed: productsSeed,
  api: productsApi,
  routes: (db, idempotency, bodyLimitBytes) => productsRoutes(createProductsService(new MySqlStore(db, productsTable)), idempotency, bodyLimitBytes),
};

/** The products API as an express app, from its dependencies. It does not listen. */
export const createApp = (dependencies: ServiceDependencies) => createServiceApp(service, dependencies);
