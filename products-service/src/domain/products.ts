import { filters, type FilterValues } from '@app/shared/resource/filters';
import { ResourceService, type ResourceDefinition, type ResourceStore } from '@app/shared/resource/rules';
import { text } from '@app/shared/platform/validation';
import { z } from 'zod';

const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));
const MAX_STOCK = 2 ** 31 - 1;
const CURRENCY_MESSAGE = 'must be an ISO 4217 currency code such as EUR';

/** "0019.9" → "19.90": the form MySQL's DECIMAL(12,2) returns, so a write echoes what a read shows. */
function canonicalAmount(amount: string): string {
  const [whole = '0', fraction = ''] = amount.split('.');
  return `${whole.replace(/^0+(?=\d)/, '')}.${fraction.padEnd(2, '0')}`;
}

/** A decimal string, never a binary float: exact from JSON to DECIMAL and back. */
const amount = z
  .string()
  .regex(/^\d{1,10}(\.\d{1,2})?$/, 'must be a decimal string from 0 to 9999999999.99 with at most 2 fraction digits')
  .meta({ description: 'A decimal string (never a JSON number) from 0 to 9999999999.99, with at most 2 fraction digits.' })
  .transform(canonicalAmount)
  // What the transform produces, stated so the API description can show it.
  .pipe(z.string().regex(/^(0|[1-9]\d{0,9})\.\d{2}$/).meta({ description: 'A decimal string with exactly 2 fraction digits, e.g. "19.90".' }));

const sku = z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1 to 64 of A-Z a-z 0-9 . _ -');

export const productFields = z.strictObject({
  sku: sku.meta({ description: 'Unique.' }),
  name: text(1, 200),
  description: text(0, 5000).default(''),
  price: z.strictObject({
    amount,
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, { error: CURRENCY_MESSAGE, abort: true })
      .refine((code) => CURRENCIES.has(code), CURRENCY_MESSAGE)
      .meta({ description: 'An ISO 4217 currency code.' }),
  }),
  stock: z.int('must be a whole number').min(0, `must be from 0 to ${MAX_STOCK}`).max(MAX_STOCK, `must be from 0 to ${MAX_STOCK}`).default(0),
});

export type ProductFields = z.infer<typeof productFields>;

/** `?sku=`: exact. Held to the sku rule: the column is ASCII, and MySQL refuses to compare it with other text. */
export const productFilter = { sku: filters.exact('sku', sku.meta({ description: 'Only the product with this sku.' })) };

export type ProductFilter = FilterValues<typeof productFilter>;

export type ProductsService = ResourceService<ProductFields, ProductFilter>;

export const productsResource: ResourceDefinition<ProductFields, typeof productFilter> = {
  name: 'product',
  fields: productFields,
  filter: productFilter,
  example: { sku: 'WIDGET-42', name: 'Widget', description: 'A very good widget.', price: { amount: '19.99', currency: 'EUR' }, stock: 42 },
};

export function createProductsService(store: ResourceStore<ProductFields, ProductFilter>): ProductsService {
  return new ResourceService(productsResource, store);
}
