import { tableOf } from '@app/shared/resource/store';
import type { SeedColumns } from '@app/shared/service';
import { productsResource } from '../domain/products.js';

export const productsTable = tableOf(productsResource, {
  table: 'products',
  uniqueIndexes: { uq_products_sku: { field: 'sku', message: 'is already taken' } },
});

/** Generated rows for `npm run seed`: valid for the API, unique per run. */
export const productsSeed: SeedColumns = { table: 'products', columns: {
  sku: "CONCAT('SEED-', @tag, '-', n)",
  name: "CONCAT('Product ', n)",
  description: "'A seeded product.'",
  price_amount: '(n % 100000) / 100',
  price_currency: "'EUR'",
  stock: 'n % 1000',
} };
