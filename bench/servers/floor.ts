/**
 * The floor of a service read: `node:http` and a mysql2 pool doing the same primary-key SELECT as
 * products-service and answering the same bytes, with nothing else (no routing, validation, logging,
 * error model). products-service straight / this is how close the service is to what the driver and
 * the database allow. Started by `npm run bench`; reads PORT and DATABASE_URL.
 */
import mysql, { type RowDataPacket } from 'mysql2';
import { serveBare } from './serve.ts';

const pool = mysql.createPool({
  uri: process.env.DATABASE_URL!,
  connectionLimit: 10,
  timezone: 'Z',
  decimalNumbers: false,
  supportBigNumbers: true,
  bigNumberStrings: true,
});
const SELECT = 'SELECT version, created_at, updated_at, sku, name, description, price_amount, price_currency, stock FROM products WHERE id = ?';
const ITEM = '/api/products/';

serveBare(
  (req, res) => {
    const url = req.url ?? '/';
    if (!url.startsWith(ITEM)) {
      res.writeHead(404).end();
      return;
    }
    const id = url.slice(ITEM.length);
    pool.execute<RowDataPacket[]>(SELECT, [Buffer.from(id.replaceAll('-', ''), 'hex')], (error, rows) => {
      const row = rows?.[0];
      if (error || !row) {
        res.writeHead(error ? 503 : 404).end();
        return;
      }
      const body = JSON.stringify({
        id,
        sku: row.sku,
        name: row.name,
        description: row.description,
        price: { amount: row.price_amount, currency: row.price_currency },
        stock: row.stock,
        createdAt: (row.created_at as Date).toISOString(),
        updatedAt: (row.updated_at as Date).toISOString(),
      });
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        etag: `"${row.version}"`,
        'cache-control': 'no-cache',
      });
      res.end(body);
    });
  },
  () => pool.end(),
);
