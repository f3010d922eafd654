import { API_PREFIX } from '@app/shared/platform/services';
import type { IdempotencyStore } from '@app/shared/resource/idempotency';
import { resourceEndpoints, resourceRoutes } from '@app/shared/resource/routes';
import { defaults } from '../config.js';
import { productsResource, type ProductsService } from '../domain/products.js';

const path = `${API_PREFIX}/products`;

/** `/api/products` (list, create) and `/api/products/{id}` (read, replace, patch, delete). */
export const productsRoutes = (products: ProductsService, idempotency: IdempotencyStore, bodyLimitBytes?: number) => resourceRoutes(path, products, idempotency, defaults.ownership, bodyLimitBytes);

/** The same declaration, for the description. */
export const productsApi = resourceEndpoints(path, productsResource, defaults.ownership, defaults.bodyLimitBytes);
