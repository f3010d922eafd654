import type { RowDataPacket } from 'mysql2';
import { isDuplicateKey, type Database, type SqlValue } from '../platform/mysql.js';
import { problems } from '../platform/problem.js';
import { columnsOf } from './columns.js';
import type { FilterSet, FilterValues } from './filters.js';
import type { ResourceDefinition, ResourceStore, Stored } from './rules.js';

/**
 * How a resource's table looks. Every table has `id BINARY(16)` (UUIDv7, so id order is creation
 * order), `owner VARBINARY(1020)` (the UTF-8 of the subject that created the row, or NULL; indexed
 * with the id, so that one owner's page is a range of the index), `version`, `created_at` and
 * `updated_at`; the mapping names the columns of the fields. The owner is binary so that SQL
 * compares it byte for byte, as the code does: a VARCHAR pads spaces (`'alice' = 'alice '`), and
 * a collation may fold case or Unicode forms.
 */
export interface TableMapping<F, Filter> {
  table: string;
  /** Columns of the writable fields, in the order `toRow` returns their values. */
  columns: readonly string[];
  toRow(fields: F): SqlValue[];
  fromRow(row: RowDataPacket): F;
  /** SQL conditions (with their values) for a list filter. */
  where(filter: Filter): { sql: string; values: SqlValue[] }[];
  /** Unique index name → the field it guards, for 409 answers. */
  uniqueIndexes?: UniqueIndexes;
}

/** Unique index name → the field it guards and what a 409 says of it. */
export type UniqueIndexes = Record<string, { field: string; message: string }>;

/** What a resource's table adds to its definition: everything else derives from the fields and filters. */
export interface TableDeclaration<Filters extends FilterSet> {
  table: string;
  /**
   * A filter's condition when it is not `<column> <comparison> ?`: SQL with one `?` for the value
   * (`email_lower = LOWER(?)` to compare with a stored lower-case copy).
   */
  conditions?: Partial<Record<keyof Filters, string>>;
  uniqueIndexes?: UniqueIndexes;
}

/**
 * The mapping of `definition`'s resource to `declaration.table`: a column per field (columns.ts
 * says how they are named and read), and each filter as a condition on its field's column.
 */
export function tableOf<F extends Record<string, unknown>, Filters extends FilterSet>(
  definition: ResourceDefinition<F, Filters>,
  declaration: TableDeclaration<Filters>,
): TableMapping<F, FilterValues<Filters>> {
  const { columns, toRow, fromRow } = columnsOf<F>(definition.fields.shape);
  const conditions = Object.entries(definition.filter).map(([parameter, { field, comparison }]) => {
    const column = columns.find((candidate) => candidate.field === field);
    if (!column) throw new Error(`The filter ${parameter} names ${field}, which is not a field of a ${definition.name}`);
    const sql = declaration.conditions?.[parameter] ?? `${column.name} ${comparison} ?`;
    return { parameter, sql };
  });
  return {
    table: declaration.table,
    columns: columns.map(({ name }) => name),
    toRow: toRow as (fields: F) => SqlValue[],
    fromRow,
    where: (filter) =>
      conditions.flatMap(({ parameter, sql }) => {
        const value = filter[parameter];
        return value === undefined ? [] : [{ sql, values: [value as SqlValue] }];
      }),
    uniqueIndexes: declaration.uniqueIndexes,
  };
}

const uuidToBin = (id: string) => Buffer.from(id.replaceAll('-', ''), 'hex');

/** An owner as its column holds it: the subject's UTF-8 bytes. */
const ownerToBin = (owner: string) => Buffer.from(owner, 'utf8');

function binToUuid(bin: Buffer): string {
  const hex = bin.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export class MySqlStore<F, Filter> implements ResourceStore<F, Filter> {
  readonly #select: string;
  readonly #selectById: string;
  readonly #insert: string;
  readonly #update: string;

  constructor(
    private readonly db: Database,
    private readonly mapping: TableMapping<F, Filter>,
  ) {
    const { table, columns } = mapping;
    const stored = `owner, version, created_at, updated_at, ${columns.join(', ')}`;
    this.#select = `SELECT id, ${stored} FROM ${table}`;
    // An item read has its id already: not sent back (fewer bytes, one column less to parse).
    this.#selectById = `SELECT ${stored} FROM ${table} WHERE id = ?`;
    this.#insert = `INSERT INTO ${table} (id, owner, version, created_at, updated_at, ${columns.join(', ')}) VALUES (${Array(columns.length + 5).fill('?').join(', ')})`;
    this.#update = `UPDATE ${table} SET version = ?, updated_at = ?, ${columns.map((c) => `${c} = ?`).join(', ')} WHERE id = ? AND version = ?`;
  }

  async list({ afterId, limit, filter, owner }: { afterId: string | undefined; limit: number; filter: Filter; owner?: string }): Promise<Stored<F>[]> {
    const conditions = this.mapping.where(filter);
    if (owner !== undefined) conditions.push({ sql: 'owner = ?', values: [ownerToBin(owner)] });
    if (afterId !== undefined) conditions.push({ sql: 'id > ?', values: [uuidToBin(afterId)] });
    const where = conditions.length ? ` WHERE ${conditions.map((c) => c.sql).join(' AND ')}` : '';
    const rows = await this.db.query(`${this.#select}${where} ORDER BY id LIMIT ?`, [...conditions.flatMap((c) => c.values), limit]);
    return rows.map((row) => this.#fromRow(row));
  }

  async find(id: string, owner?: string): Promise<Stored<F> | undefined> {
    const row = (await this.db.query(owner === undefined ? this.#selectById : `${this.#selectById} AND owner = ?`, owner === undefined ? [uuidToBin(id)] : [uuidToBin(id), ownerToBin(owner)]))[0];
    return row && this.#fromRow(row, id);
  }

  async insert(resource: Stored<F>): Promise<void> {
    await this.#write(this.#insert, [
      uuidToBin(resource.id),
      resource.owner === null ? null : ownerToBin(resource.owner),
      resource.version,
      resource.createdAt,
      resource.updatedAt,
      ...this.mapping.toRow(resource.fields),
    ]);
  }

  async update(resource: Stored<F>, expectedVersion: number): Promise<boolean> {
    const values = [resource.version, resource.updatedAt, ...this.mapping.toRow(resource.fields), uuidToBin(resource.id), expectedVersion];
    return (await this.#write(this.#update, values)) === 1;
  }

  async delete(id: string, expectedVersion?: number): Promise<boolean> {
    const sql = `DELETE FROM ${this.mapping.table} WHERE id = ?${expectedVersion === undefined ? '' : ' AND version = ?'}`;
    const values: SqlValue[] = expectedVersion === undefined ? [uuidToBin(id)] : [uuidToBin(id), expectedVersion];
    return (await this.db.execute(sql, values)) === 1;
  }

  /** A write whose unique-index violations become 409 problems naming the field. */
  async #write(sql: string, values: SqlValue[]): Promise<number> {
    try {
      return await this.db.execute(sql, values);
    } catch (error) {
      for (const [index, { field, message }] of Object.entries(this.mapping.uniqueIndexes ?? {})) {
        if (isDuplicateKey(error, index)) throw problems.conflict(field, message);
      }
      throw error;
    }
  }

  /** The resource a row holds; `id` when the row has none (an item read), in the form the API uses. */
  #fromRow(row: RowDataPacket, id = binToUuid(row.id as Buffer)): Stored<F> {
    return {
      id,
      owner: row.owner === null ? null : (row.owner as Buffer).toString('utf8'),
      version: Number(row.version),
      createdAt: row.created_at as Date,
      updatedAt: row.updated_at as Date,
      fields: this.mapping.fromRow(row),
    };
  }
}
