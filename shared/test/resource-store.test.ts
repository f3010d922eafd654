import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { v7 as uuidv7 } from 'uuid';
import { Database } from '@app/shared/platform/mysql';
import { HttpProblem } from '@app/shared/platform/problem';
import type { Stored } from '@app/shared/resource/rules';
import { MySqlStore, type TableMapping } from '@app/shared/resource/store';

/** A resource's rows in MySQL through its table mapping: against the local MySQL, in a schema of its own. */

interface Widget {
  name: string;
  colour: string;
  stock: number;
}
interface WidgetFilter {
  colour?: string;
  minStock?: number;
}

const widgetsTable: TableMapping<Widget, WidgetFilter> = {
  table: 'widgets',
  columns: ['name', 'colour', 'stock'],
  toRow: (widget) => [widget.name, widget.colour, widget.stock],
  fromRow: (row) => ({ name: row.name as string, colour: row.colour as string, stock: Number(row.stock) }),
  where: (filter) => [
    ...(filter.colour === undefined ? [] : [{ sql: 'colour = ?', values: [filter.colour] }]),
    ...(filter.minStock === undefined ? [] : [{ sql: 'stock >= ?', values: [filter.minStock] }]),
  ],
  uniqueIndexes: {
    uq_widgets_name: { field: 'name', message: 'is already taken' },
    uq_widgets_label: { field: 'label', message: 'is taken by another widget' },
  },
};

const schema = `t_${randomBytes(5).toString('hex')}_resource_store`;
let admin: mysql.Connection;
let db: Database;
let widgets: MySqlStore<Widget, WidgetFilter>;

beforeAll(async () => {
  admin = await mysql.createConnection(process.env.TEST_MYSQL_URL!);
  await admin.query(`CREATE DATABASE \`${schema}\``);
  const url = new URL(process.env.TEST_MYSQL_URL!);
  url.pathname = `/${schema}`;
  db = new Database(url.toString());
  // `label` is unique too: a second index a conflict must be told apart by (name and colour, joined).
  await db.query(`CREATE TABLE widgets (
    id BINARY(16) NOT NULL,
    owner VARBINARY(1020) NULL,
    name VARCHAR(50) NOT NULL,
    colour VARCHAR(20) NOT NULL,
    stock INT NOT NULL,
    label VARCHAR(80) AS (CONCAT(colour, '/', stock)) STORED,
    version INT UNSIGNED NOT NULL,
    created_at DATETIME(3) NOT NULL,
    updated_at DATETIME(3) NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_widgets_name (name),
    UNIQUE KEY uq_widgets_label (label),
    KEY ix_widgets_owner (owner, id)
  ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
});
afterAll(async () => {
  await db?.close();
  await admin?.query(`DROP DATABASE IF EXISTS \`${schema}\``);
  await admin?.end();
});
beforeEach(async () => {
  await db.execute('DELETE FROM widgets');
  widgets = new MySqlStore(db, widgetsTable);
});

let made = 0;
/** A new widget at version 1, created `ms` after a fixed time. */
function widget(fields: Partial<Widget> = {}, ms = 0): Stored<Widget> {
  made++;
  const at = new Date(Date.UTC(2026, 10, 21, 10, 0, 0, 123) + ms);
  return { id: uuidv7(), owner: made % 2 === 0 ? `owner ${made}` : null, version: 1, createdAt: at, updatedAt: at, fields: { name: `widget ${made}`, colour: 'red', stock: made, ...fields } };
}

async function inserted(...all: Stored<Widget>[]): Promise<Stored<Widget>[]> {
  for (const one of all) await widgets.insert(one);
  return all;
}

const problemOf = async (promise: Promise<unknown>) => {
  const error = await promise.then(() => undefined, (caught: unknown) => caught);
  expect(error).toBeInstanceOf(HttpProblem);
  const problem = error as HttpProblem;
  return { status: problem.status, detail: problem.detail, errors: problem.extras.errors };
};

describe('MySqlStore', () => {
  it('finds what it inserted: id, version, times and fields as they were', async () => {
    const [one] = await inserted(widget({ name: 'Ünïcode ✓', colour: 'blue', stock: 0 }, 456));
    expect(await widgets.find(one!.id)).toEqual(one);
    expect(await widgets.find(uuidv7())).toBeUndefined();
  });

  it('lists in id order, after a cursor, at most the limit', async () => {
    const all = await inserted(widget(), widget(), widget(), widget());
    expect(await widgets.list({ afterId: undefined, limit: 10, filter: {} })).toEqual(all);
    expect(await widgets.list({ afterId: undefined, limit: 2, filter: {} })).toEqual(all.slice(0, 2));
    expect(await widgets.list({ afterId: all[1]!.id, limit: 10, filter: {} })).toEqual(all.slice(2));
    expect(await widgets.list({ afterId: all[3]!.id, limit: 10, filter: {} })).toEqual([]);
  });

  it("lists what every condition of the filter holds for, after the cursor", async () => {
    const all = await inserted(widget({ colour: 'blue', stock: 5 }), widget({ colour: 'red', stock: 5 }), widget({ colour: 'blue', stock: 1 }), widget({ colour: 'blue', stock: 9 }));
    const ids = async (afterId: string | undefined, filter: WidgetFilter) => (await widgets.list({ afterId, limit: 10, filter })).map(({ id }) => id);
    expect(await ids(undefined, { colour: 'blue' })).toEqual([all[0]!.id, all[2]!.id, all[3]!.id]);
    expect(await ids(undefined, { colour: 'blue', minStock: 5 })).toEqual([all[0]!.id, all[3]!.id]);
    expect(await ids(all[0]!.id, { colour: 'blue', minStock: 5 })).toEqual([all[3]!.id]);
  });

  it('finds and lists the rows of an owner only by its exact subject: spaces, case and Unicode form count', async () => {
    // José in NFC (é is U+00E9), with a space after and before, in other case, and in NFD (e, then U+0301).
    const subjects = ['Jos\u00e9', 'Jos\u00e9 ', ' Jos\u00e9', 'jos\u00e9', 'Jose\u0301'];
    const all = await inserted(...subjects.map((owner) => ({ ...widget(), owner })));
    for (const [index, owner] of subjects.entries()) {
      expect((await widgets.list({ afterId: undefined, limit: 10, filter: {}, owner })).map((row) => row.owner)).toEqual([owner]);
      for (const [other, row] of all.entries()) expect(await widgets.find(row.id, owner)).toEqual(other === index ? row : undefined);
    }
  });

  it('updates only at the expected version', async () => {
    const [one] = await inserted(widget());
    const next = { ...one!, version: 2, updatedAt: new Date(one!.updatedAt.getTime() + 1_000), fields: { name: 'renamed', colour: 'green', stock: 7 } };
    expect(await widgets.update(next, 2)).toBe(false);
    expect(await widgets.find(one!.id)).toEqual(one);
    expect(await widgets.update(next, 1)).toBe(true);
    expect(await widgets.find(one!.id)).toEqual(next);
    expect(await widgets.update({ ...next, id: uuidv7() }, 1)).toBe(false);
  });

  it('deletes, at the expected version when one is given, and says whether it did', async () => {
    const [one, two] = await inserted(widget(), widget());
    expect(await widgets.delete(one!.id, 2)).toBe(false);
    expect(await widgets.delete(one!.id, 1)).toBe(true);
    expect(await widgets.delete(one!.id, 1)).toBe(false);
    expect(await widgets.delete(two!.id)).toBe(true);
    expect(await widgets.delete(two!.id)).toBe(false);
    expect(await widgets.list({ afterId: undefined, limit: 10, filter: {} })).toEqual([]);
  });

  it('answers 409 naming the field whose unique index an insert or update violates', async () => {
    const [one] = await inserted(widget({ name: 'taken', colour: 'red', stock: 1 }));
    expect(await problemOf(widgets.insert(widget({ name: 'taken' })))).toEqual({ status: 409, detail: 'name is already taken', errors: [{ path: 'name', message: 'is already taken' }] });
    expect(await problemOf(widgets.insert(widget({ colour: 'red', stock: 1 })))).toEqual({
      status: 409,
      detail: 'label is taken by another widget',
      errors: [{ path: 'label', message: 'is taken by another widget' }],
    });
    const [two] = await inserted(widget());
    expect(await problemOf(widgets.update({ ...two!, version: 2, fields: { ...two!.fields, name: 'taken' } }, 1))).toMatchObject({ status: 409, detail: 'name is already taken' });
    expect(await widgets.find(one!.id)).toEqual(one);
  });

  it('lets other failures of a write through as they are', async () => {
    const [one] = await inserted(widget());
    const failure = await widgets.insert(one!).then(() => undefined, (caught: unknown) => caught);
    expect(failure).not.toBeInstanceOf(HttpProblem);
    expect(failure).toMatchObject({ code: 'ER_DUP_ENTRY' });
    const tooLong = await widgets.insert(widget({ name: 'x'.repeat(51) })).then(() => undefined, (caught: unknown) => caught);
    expect(tooLong).toMatchObject({ code: 'ER_DATA_TOO_LONG' });
  });
});
