import type { ResourceCase } from '../../test/support/resource-case.js';
import { productFilter } from '../src/domain/products.js';

/** Products, for the per-resource suites (test/support/resource-case.ts). */
export const apiCase: ResourceCase = {
  valid: (n) => ({ sku: `SKU-${n}`, name: `Product ${n}`, description: 'Good.', price: { amount: '19.9', currency: 'EUR' }, stock: n }),
  echoed: (body) => ({ description: '', stock: 0, ...body, price: { amount: '19.90', currency: 'EUR' } }),
  invalid: { body: { sku: 'has space', name: 'x', price: { amount: 19.99, currency: 'eur' } }, paths: ['sku', 'price.amount', 'price.currency'] },
  required: 'name',
  patch: { body: { price: { amount: '5.5' } }, expected: { price: { amount: '5.50', currency: 'EUR' } } },
  filters: productFilter,
  unique: {
    field: 'sku',
    duplicateOf: (body, n) => ({ sku: body.sku, name: `Other ${n}`, price: { amount: '1', currency: 'USD' } }),
  },
};
