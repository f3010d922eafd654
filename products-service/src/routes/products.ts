import { resourceRoutes } from '@app/shared/resource-routes';
import type { ProductsService } from '../domain/products.js';

/** `/api/products` (list, create) and `/api/products/{id}` (read, replace, patch, delete). */
export const productsRoutes = (products: ProductsService) => resourceRoutes('/api/products', products);
