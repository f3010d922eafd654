/**
 * The rules of a product that are its own (price, currency, stock, sku, description), against the
 * products service and its real MySQL schema. The conventions every resource shares are in
 * test/e2e/api-conventions.test.ts.
 */
import { client, expectProblem, type Client } from '../../test/support/http.js';
import { startProductsService, type RunningService } from '../../test/support/stack.js';

let products: RunningService;
let api: Client;
let counter = 0;

beforeAll(async () => {
  products = await startProductsService();
  api = client(products.url);
});
afterAll(() => products.close());

const uniqueSku = (prefix = 'SKU') => `${prefix}-${++counter}`;

/** A valid product body with `overrides` applied; a fresh sku unless overridden. */
function product(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { sku: uniqueSku(), name: 'Widget', description: 'A very good widget.', price: { amount: '19.99', currency: 'EUR' }, stock: 42, ...overrides };
}

async function create(overrides: Record<string, unknown> = {}) {
  const response = await api.post('/api/products', product(overrides));
  expect(response.status).toBe(201);
  return { body: response.body, location: response.headers.get('location')! };
}

/** The field errors of a 400 validation problem. */
function validationErrors(response: Awaited<ReturnType<Client['post']>>): { path: string; message: string }[] {
  return expectProblem(response, 400, 'validation').errors;
}

/** What MySQL holds for the product with `sku`, as text: no driver conversion on the way. */
async function storedRow(sku: string) {
  const [row] = await products.db.query('SELECT CAST(price_amount AS CHAR) AS amount, price_currency AS currency, stock, description FROM products WHERE sku = ?', [sku]);
  return row;
}

const AMOUNT_MESSAGE = 'must be a decimal string from 0 to 9999999999.99 with at most 2 fraction digits';

describe('price.amount', () => {
  it.each([
    ['9999999999.99', '9999999999.99'],
    ['1234567890.12', '1234567890.12'],
    ['0.1', '0.10'],
    ['0.01', '0.01'],
    ['0', '0.00'],
    ['007.50', '7.50'],
    ['1000000', '1000000.00'],
    ['0.30', '0.30'],
  ])('stores %s exactly and reads it back as %s', async (amount, canonical) => {
    const created = await create({ price: { amount, currency: 'EUR' } });
    expect(created.body.price).toEqual({ amount: canonical, currency: 'EUR' });
    expect((await api.get(created.location)).body.price).toEqual({ amount: canonical, currency: 'EUR' });
    expect((await api.get(`/api/products?sku=${created.body.sku}`)).body.items[0].price.amount).toBe(canonical);
    expect((await storedRow(created.body.sku))?.amount).toBe(canonical);
  });

  it('keeps the exact digits through a PUT and a PATCH', async () => {
    const created = await create();
    const put = await api.put(created.location, product({ sku: created.body.sku, price: { amount: '9999999999.98', currency: 'EUR' } }));
    expect(put.body.price.amount).toBe('9999999999.98');
    const patched = await api.patch(created.location, { price: { amount: '0.7' } });
    expect(patched.body.price.amount).toBe('0.70');
    expect((await storedRow(created.body.sku))?.amount).toBe('0.70');
  });

  it('answers amounts as JSON strings, never numbers', async () => {
    const created = await api.post('/api/products', product({ price: { amount: '1234567.89', currency: 'EUR' } }));
    expect(created.text).toContain('"amount":"1234567.89"');
  });

  it.each([
    ['a JSON number', 19.99, 'must be a string'],
    ['the JSON number 0', 0, 'must be a string'],
    ['3 fraction digits', '1.234', AMOUNT_MESSAGE],
    ['10^10', '10000000000', AMOUNT_MESSAGE],
    ['10^10 with fraction digits', '10000000000.00', AMOUNT_MESSAGE],
    ['a negative amount', '-1', AMOUNT_MESSAGE],
    ['a negative cent', '-0.01', AMOUNT_MESSAGE],
    ['an exponent', '1e3', AMOUNT_MESSAGE],
    ['a trailing dot', '1.', AMOUNT_MESSAGE],
    ['no whole part', '.5', AMOUNT_MESSAGE],
    ['a comma', '1,50', AMOUNT_MESSAGE],
    ['spaces', ' 1.50', AMOUNT_MESSAGE],
    ['an empty string', '', AMOUNT_MESSAGE],
    ['null', null, 'must not be null'],
  ])('answers 400 to %s', async (_label, amount, message) => {
    const errors = validationErrors(await api.post('/api/products', product({ price: { amount, currency: 'EUR' } })));
    expect(errors).toEqual([{ path: 'price.amount', message }]);
  });
});

describe('price.currency', () => {
  it.each(['EUR', 'USD', 'JPY', 'CHF'])('accepts %s', async (currency) => {
    const created = await create({ price: { amount: '1', currency } });
    expect(created.body.price.currency).toBe(currency);
    expect((await storedRow(created.body.sku))?.currency).toBe(currency);
  });

  it.each(['eur', 'Eur', 'XYZ', 'EURO', 'EU', '', '€'])('answers 400 to %j', async (currency) => {
    const errors = validationErrors(await api.post('/api/products', product({ price: { amount: '1', currency } })));
    expect(errors).toEqual([{ path: 'price.currency', message: 'must be an ISO 4217 currency code such as EUR' }]);
  });

  it('answers 400 when the currency is missing or the price has another field', async () => {
    expect(validationErrors(await api.post('/api/products', product({ price: { amount: '1' } })))).toEqual([
      { path: 'price.currency', message: 'is required' },
    ]);
    expect(validationErrors(await api.post('/api/products', product({ price: { amount: '1', currency: 'EUR', vat: '0.2' } })))).toEqual([
      { path: 'price.vat', message: 'is not a known field' },
    ]);
  });
});

describe('stock', () => {
  it('accepts 0 and 2^31-1', async () => {
    expect((await create({ stock: 0 })).body.stock).toBe(0);
    const max = await create({ stock: 2147483647 });
    expect(max.body.stock).toBe(2147483647);
    expect((await api.get(max.location)).body.stock).toBe(2147483647);
  });

  it('defaults to 0', async () => {
    const body = product();
    delete body.stock;
    const response = await api.post('/api/products', body);
    expect(response.status).toBe(201);
    expect(response.body.stock).toBe(0);
    expect((await api.get(response.headers.get('location')!)).body.stock).toBe(0);
  });

  it.each([2147483648, -1, 1.5, '3', null, true])('answers 400 to %j', async (stock) => {
    const errors = validationErrors(await api.post('/api/products', product({ stock })));
    expect(errors).toHaveLength(1);
    expect(errors[0]!.path).toBe('stock');
  });
});

describe('sku', () => {
  it('accepts 64 characters of A-Z a-z 0-9 . _ -', async () => {
    const sku = `Az09._-${++counter}-`.padEnd(64, 'Q');
    expect(sku).toHaveLength(64);
    expect((await create({ sku })).body.sku).toBe(sku);
  });

  it.each([
    ['65 characters', 'x'.repeat(65)],
    ['a space', 'has space'],
    ['a slash', 'a/b'],
    ['a plus', 'a+b'],
    ['a non-ASCII letter', 'größe-1'],
    ['an empty string', ''],
  ])('answers 400 to a sku with %s', async (_label, sku) => {
    expect(validationErrors(await api.post('/api/products', product({ sku })))).toEqual([{ path: 'sku', message: 'must be 1 to 64 of A-Z a-z 0-9 . _ -' }]);
  });

  it('is unique with case: skus that differ only in case are different products', async () => {
    const lower = await create({ sku: `case-${++counter}` });
    const upper = await create({ sku: lower.body.sku.toUpperCase() });
    expect(upper.body.id).not.toBe(lower.body.id);
  });

  it('filters ?sku= exactly and with case', async () => {
    const sku = `Filter-${++counter}`;
    const created = await create({ sku });
    await create({ sku: `${sku}0` });
    await create({ sku: sku.toLowerCase() });
    expect((await api.get(`/api/products?sku=${sku}`)).body).toEqual({ items: [created.body], nextCursor: null });
    expect((await api.get(`/api/products?sku=${sku.toUpperCase()}`)).body).toEqual({ items: [], nextCursor: null });
    expect((await api.get(`/api/products?sku=${sku.slice(0, -1)}`)).body).toEqual({ items: [], nextCursor: null });
  });

  it('treats _ in ?sku= literally, not as a wildcard, and refuses % (no sku has it)', async () => {
    const n = ++counter;
    await create({ sku: `WILD-A-${n}` });
    expect((await api.get(`/api/products?sku=WILD_A-${n}`)).body.items).toEqual([]);
    expectProblem(await api.get(`/api/products?sku=${encodeURIComponent(`WILD-%-${n}`)}`), 400, 'validation');
  });

  it.each(['größe', '😀', 'has space'])('answers a ?sku= no product can have (%j) with no items or a 400 naming sku, never a 500', async (sku) => {
    const response = await api.get(`/api/products?sku=${encodeURIComponent(sku)}`);
    if (response.status === 400) {
      expect(expectProblem(response, 400, 'validation').errors).toEqual([{ path: 'sku', message: expect.any(String) }]);
    } else {
      expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: { items: [], nextCursor: null } });
    }
  });

  it('answers 400 to a ?sku= longer than 64 characters', async () => {
    expectProblem(await api.get(`/api/products?sku=${'x'.repeat(65)}`), 400, 'validation');
  });
});

describe('name', () => {
  it('accepts 200 characters, emoji counting as one each, and stores them exactly', async () => {
    expect((await create({ name: 'n'.repeat(200) })).body.name).toBe('n'.repeat(200));
    const emoji = await create({ name: '📦'.repeat(200) });
    expect((await api.get(emoji.location)).body.name).toBe('📦'.repeat(200));
  });

  it('answers 400 to 201 characters', async () => {
    for (const name of ['n'.repeat(201), '📦'.repeat(201)]) {
      expect(validationErrors(await api.post('/api/products', product({ name })))).toEqual([{ path: 'name', message: 'must be at most 200 characters' }]);
    }
  });

  it('answers 400 to an empty name', async () => {
    expect(validationErrors(await api.post('/api/products', product({ name: '' })))).toEqual([{ path: 'name', message: 'must not be empty' }]);
  });
});

describe('description', () => {
  it('defaults to ""', async () => {
    const body = product();
    delete body.description;
    const response = await api.post('/api/products', body);
    expect(response.status).toBe(201);
    expect(response.body.description).toBe('');
    expect((await storedRow(response.body.sku))?.description).toBe('');
  });

  it('accepts 5000 characters, emoji included, and answers 400 to 5001', async () => {
    const long = await create({ description: '🧩'.repeat(5000) });
    expect((await api.get(long.location)).body.description).toBe('🧩'.repeat(5000));
    expect(validationErrors(await api.post('/api/products', product({ description: 'd'.repeat(5001) })))).toEqual([
      { path: 'description', message: 'must be at most 5000 characters' },
    ]);
  });

  it('goes back to "" when PATCH sets it to null', async () => {
    const created = await create({ description: 'Soon gone.' });
    const patched = await api.patch(created.location, { description: null });
    expect(patched.status).toBe(200);
    expect(patched.body.description).toBe('');
    expect((await api.get(created.location)).body.description).toBe('');
  });
});

describe('PUT (full replacement)', () => {
  it('resets description to "" and stock to 0 when the body omits them', async () => {
    const created = await create({ description: 'Will be reset.', stock: 7 });
    const response = await api.put(created.location, { sku: created.body.sku, name: 'Replaced', price: { amount: '2', currency: 'USD' } });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ name: 'Replaced', description: '', stock: 0, price: { amount: '2.00', currency: 'USD' } });
    expect((await api.get(created.location)).body).toEqual(response.body);
  });

  it('answers 400 when the price is only partly given', async () => {
    const created = await create();
    const response = await api.put(created.location, { sku: created.body.sku, name: 'Widget', price: { amount: '2' } });
    expect(validationErrors(response)).toEqual([{ path: 'price.currency', message: 'is required' }]);
  });
});

describe('PATCH (merge patch)', () => {
  it('changes the amount and keeps the currency', async () => {
    const created = await create({ price: { amount: '19.99', currency: 'CHF' } });
    const patched = await api.patch(created.location, { price: { amount: '1' } });
    expect(patched.status).toBe(200);
    expect(patched.body.price).toEqual({ amount: '1.00', currency: 'CHF' });
    expect((await api.get(created.location)).body.price).toEqual({ amount: '1.00', currency: 'CHF' });
  });

  it('changes the currency and keeps the amount', async () => {
    const created = await create({ price: { amount: '5.25', currency: 'EUR' } });
    expect((await api.patch(created.location, { price: { currency: 'GBP' } })).body.price).toEqual({ amount: '5.25', currency: 'GBP' });
  });

  it('answers 400 to a price of null or a price without its currency, and changes nothing', async () => {
    const created = await create({ stock: 5 });
    expect(validationErrors(await api.patch(created.location, { price: null }))).toEqual([{ path: 'price', message: 'is required' }]);
    expect(validationErrors(await api.patch(created.location, { price: { currency: null } }))).toEqual([
      { path: 'price.currency', message: 'is required' },
    ]);
    expect((await api.get(created.location)).body).toEqual(created.body);
  });

  it('sets stock back to its default 0 when patched to null', async () => {
    const created = await create({ stock: 9 });
    expect((await api.patch(created.location, { stock: null })).body.stock).toBe(0);
  });

  it('answers 400 to an amount with 3 fraction digits', async () => {
    const created = await create();
    expect(validationErrors(await api.patch(created.location, { price: { amount: '0.001' } }))).toEqual([
      { path: 'price.amount', message: AMOUNT_MESSAGE },
    ]);
  });
});

describe('item reads', () => {
  // GET and HEAD of an item are answered before express; any other spelling of the URL (here an
  // empty query) goes through express's router to the same handler. Both must answer alike.
  const viaExpress = (location: string) => `${location}?`;
  const HEADERS = ['content-type', 'content-length', 'etag', 'cache-control'];
  const headersOf = (response: Awaited<ReturnType<Client['get']>>) => Object.fromEntries(HEADERS.map((name) => [name, response.headers.get(name)]));

  it('answers the same status, headers and body before express as through it', async () => {
    const created = await create();
    for (const [method, path] of [['GET', created.location], ['GET', viaExpress(created.location)], ['HEAD', created.location], ['HEAD', viaExpress(created.location)]] as const) {
      const response = await api.send(method, path, { headers: { 'x-request-id': 'read-1' } });
      expect({ method, path, status: response.status }).toEqual({ method, path, status: 200 });
      expect(headersOf(response)).toEqual({ 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(JSON.stringify(created.body))), etag: '"1"', 'cache-control': 'no-cache' });
      expect(response.headers.get('x-request-id')).toBe('read-1');
      expect(response.body).toEqual(method === 'GET' ? created.body : undefined);
    }
  });

  it('answers 304 to a matching If-None-Match and 404 to an unknown id, both ways', async () => {
    const created = await create();
    const unknown = created.location.replace(/.{4}$/, '0000');
    for (const path of [created.location, viaExpress(created.location)]) {
      const notModified = await api.get(path, { headers: { 'if-none-match': 'W/"1"' } });
      expect({ status: notModified.status, etag: notModified.headers.get('etag'), text: notModified.text }).toEqual({ status: 304, etag: '"1"', text: '' });
    }
    const problems = [await api.get(unknown), await api.get(viaExpress(unknown))].map((response) => expectProblem(response, 404, 'not-found'));
    expect(problems[0]).toEqual(problems[1]);
  });
});
