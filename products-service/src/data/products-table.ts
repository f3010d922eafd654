import type { TableMapping } from '@app/shared/resource/store';
import type { SeedColumns } from '@app/shared/service';
import type { ProductFields, ProductFilter } from '../domain/products.js';

export const productsTable: TableMapping<ProductFields, ProductFilter> = {
  table: 'products',
  columns: ['sku', 'name', 'description', 'price_amount', 'price_currency', 'stock'],
  toRow: (product) => [product.sku, product.name, product.description, product.price.amount, product.price.currency, product.stock],
  fromRow: (row) => ({
    sku: row.sku as string,
    name: row.name as string,
    description: row.description as string,
    price: { amount: row.price_amount as string, currency: row.price_currency as string },
    stock: Number(row.stock),
  }),
  where: (filter) => (filter.sku === undefined ? [] : [{ sql: 'sku = ?', values: [filter.sku] }]),
  uniqueIndexes: { uq_products_sku: { field: 'sku', message: 'is already taken' } },
};

/** Generated rows for `npm run seed`: valid for the API, unique per run. */
export const productsSeed: SeedColumns = { table: 'products', columns: {
  sku: "CONCAT('SEED-', @tag, '-', n)",
  name: "CONCAT('Product ', n)",
  description: "'A seeded product.'",
  price_amount: '(n % 100000) / 100',
  price_currency: "'EUR'",
  stock: 'n % 1000',
} };
