import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { v7 as uuidv7 } from 'uuid';
import { z } from 'zod';
import { Database } from '@app/shared/platform/mysql';
import { columnsOf } from '@app/shared/resource/columns';
import { filters, type FilterValues } from '@app/shared/resource/filters';
import type { ResourceDefinition, Stored } from '@app/shared/resource/rules';
import { MySqlStore, tableOf } from '@app/shared/resource/store';

/**
 * A table declared from a resource's definition alone (`tableOf`): its columns named and read from
 * the zod fields, and each kind of filter as a condition on its column, against the local MySQL.
 */

const reviewFields = z.strictObject({
  productId: z.uuid(),
  rating: z.int().min(1, 'must be from 1 to 5').max(5, 'must be from 1 to 5'),
  status: z.enum(['draft', 'published']).default('draft'),
  author: z.strictObject({ name: z.string(), verified: z.boolean() }),
  text: z.string().trim().pipe(z.string().max(100)).optional(),
  note: z.string().nullable(),
});
type Review = z.infer<typeof reviewFields>;
const reviewFilter = {
  productId: filters.uuid('productId'),
  rating: filters.integer('rating', reviewFields.shape.rating),
  ...filters.range('rating', reviewFields.shape.rating),
  status: filters.oneOf('status', ['draft', 'published']),
  author: filters.exact('author.name', z.string()),
};
const reviews: ResourceDefinition<Review, typeof reviewFilter> = { name: 'review', fields: reviewFields, filter: reviewFilter, example: {} };

describe('columnsOf', () => {
  const { columns, toRow, fromRow } = columnsOf<Review>(reviewFields.shape);
  const review: Review = { productId: uuidv7(), rating: 4, status: 'published', author: { name: 'Ada', verified: true }, text: 'Good.', note: null };

  it('names a column after its field in snake case, a nested field after its path', () => {
    expect(columns.map(({ field, name }) => [field, name])).toEqual([
      ['productId', 'product_id'],
      ['rating', 'rating'],
      ['status', 'status'],
      ['author.name', 'author_name'],
      ['author.verified', 'author_verified'],
      ['text', 'text'],
      ['note', 'note'],
    ]);
  });

  it('gives the values in the order of the columns, NULL for an absent optional field', () => {
    expect(toRow(review)).toEqual([review.productId, 4, 'published', 'Ada', true, 'Good.', null]);
    expect(toRow({ ...review, text: undefined, note: 'n' })).toEqual([review.productId, 4, 'published', 'Ada', true, null, 'n']);
  });

  it("reads a row back as the fields' types say, past defaults, pipes and optionality", () => {
    const row = { product_id: review.productId, rating: '4', status: 'published', author_name: 'Ada', author_verified: 1, text: 'Good.', note: null };
    expect(fromRow(row)).toEqual(review);
    expect(Object.keys(fromRow(row))).toEqual(['productId', 'rating', 'status', 'author', 'text', 'note']);
    expect(Object.keys(fromRow({ ...row, text: null }))).toEqual(['productId', 'rating', 'status', 'author', 'note']);
    expect(fromRow({ ...row, rating: 5n, author_verified: 0 })).toMatchObject({ rating: 5, author: { verified: false } });
    const nullable = columnsOf<Record<string, unknown>>({ count: z.int().nullable(), flag: z.boolean().nullable().optional(), label: z.string().optional() });
    expect(nullable.fromRow({ count: null, flag: null, label: null })).toStrictEqual({ count: null, flag: null });
  });
});

describe('tableOf', () => {
  const schema = `t_${randomBytes(5).toString('hex')}_resource_table`;
  let admin: mysql.Connection;
  let db: Database;
  const table = tableOf(reviews, { table: 'reviews', conditions: { author: 'LOWER(author_name) = LOWER(?)' } });
  let store: MySqlStore<Review, FilterValues<typeof reviewFilter>>;

  beforeAll(async () => {
    admin = await mysql.createConnection(process.env.TEST_MYSQL_URL!);
    await admin.query(`CREATE DATABASE \`${schema}\``);
    const url = new URL(process.env.TEST_MYSQL_URL!);
    url.pathname = `/${schema}`;
    db = new Database(url.toString());
    await db.query(`CREATE TABLE reviews (
      id BINARY(16) NOT NULL, owner VARBINARY(1020) NULL, version INT UNSIGNED NOT NULL, created_at DATETIME(3) NOT NULL, updated_at DATETIME(3) NOT NULL,
      product_id CHAR(36) CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL, rating TINYINT NOT NULL, status VARCHAR(20) NOT NULL,
      author_name VARCHAR(50) NOT NULL, author_verified BOOLEAN NOT NULL, text VARCHAR(100) NULL, note VARCHAR(100) NULL,
      PRIMARY KEY (id), UNIQUE KEY uq_reviews_author (author_name)
    )`);
    store = new MySqlStore(db, table);
    for (const review of all) await store.insert(review);
  });
  afterAll(async () => {
    await db?.close();
    await admin?.query(`DROP DATABASE IF EXISTS \`${schema}\``);
    await admin?.end();
  });

  const at = new Date(Date.UTC(2026, 10, 21, 10));
  const product = uuidv7();
  const stored = (rating: number, status: Review['status'], name: string, productId = product): Stored<Review> => ({
    id: uuidv7(),
    owner: name,
    version: 1,
    createdAt: at,
    updatedAt: at,
    fields: { productId, rating, status, author: { name, verified: rating > 2 }, ...(rating > 3 ? { text: 'Fine.' } : {}), note: rating > 4 ? null : 'n' },
  });
  const all = [stored(1, 'draft', 'Ann'), stored(3, 'published', 'Bob'), stored(5, 'published', 'Cy'), stored(4, 'draft', 'Di', uuidv7())];
  const listed = async (filter: FilterValues<typeof reviewFilter>) => (await store.list({ afterId: undefined, limit: 10, filter })).map(({ fields }) => fields.author.name);

  it('stores the fields in their columns and reads them back as they were', async () => {
    for (const review of all) expect(await store.find(review.id)).toStrictEqual(review);
  });

  it('lists by each kind of filter, every given one holding', async () => {
    expect(await listed({})).toEqual(['Ann', 'Bob', 'Cy', 'Di']);
    expect(await listed({ productId: product })).toEqual(['Ann', 'Bob', 'Cy']);
    expect(await listed({ productId: product.toUpperCase() })).toEqual(['Ann', 'Bob', 'Cy']);
    expect(await listed({ rating: 3 })).toEqual(['Bob']);
    expect(await listed({ minRating: 3 })).toEqual(['Bob', 'Cy', 'Di']);
    expect(await listed({ maxRating: 3 })).toEqual(['Ann', 'Bob']);
    expect(await listed({ minRating: 2, maxRating: 4 })).toEqual(['Bob', 'Di']);
    expect(await listed({ status: 'published', minRating: 4 })).toEqual(['Cy']);
    expect(await listed({ author: 'dI' })).toEqual(['Di']);
  });

  it('lets a unique violation through as it is when no index is declared', async () => {
    const failure = await store.insert(stored(2, 'draft', 'Ann')).then(() => undefined, (caught: unknown) => caught);
    expect(failure).toMatchObject({ code: 'ER_DUP_ENTRY' });
  });

  it('refuses a filter on a field the resource does not have', () => {
    const typo = { ...reviews, filter: { colour: filters.exact('colour', z.string()) } };
    expect(() => tableOf(typo, { table: 'reviews' })).toThrow('The filter colour names colour, which is not a field of a review');
  });
});
