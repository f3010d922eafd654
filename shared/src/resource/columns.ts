import type { z } from 'zod';

/**
 * A resource's columns, from its zod fields: one column per field, named as the field in snake
 * case (`productId` → `product_id`); a nested object's fields each have their own, prefixed with
 * its name (`price.amount` → `price_amount`). A column is read back as its field's type: MySQL
 * drivers may return an integer column as a string or a BigInt, a boolean as 0 or 1.
 */

export interface Column {
  /** The field's dotted path (`price.amount`). */
  field: string;
  name: string;
  /** A driver's value of the column, as the field holds it. */
  read(value: unknown): unknown;
  /** An optional field that cannot be null: NULL is its absence. */
  absentWhenNull: boolean;
}

/** A field or a nested object of fields, in the order the schema declares them. */
type Node = { key: string; column: Column } | { key: string; children: Node[] };

const snakeCase = (name: string) => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

const asIs = (value: unknown) => value;
const asNumber = (value: unknown) => (value === null ? null : Number(value));
const asBoolean = (value: unknown) => (value === null ? null : Boolean(Number(value)));

interface Definition {
  type: string;
  innerType?: z.ZodType;
  out?: z.ZodType;
  shape?: z.ZodRawShape;
}
const definitionOf = (schema: z.ZodType) => schema._zod.def as unknown as Definition;

/** What a field's schema produces, past defaults, optionality and pipes; the wrappers' types on the way. */
function produced(schema: z.ZodType, wrappers: string[] = []): Definition & { wrappers: string[] } {
  const definition = definitionOf(schema);
  const inner = definition.innerType ?? definition.out;
  return inner ? produced(inner, [...wrappers, definition.type]) : { ...definition, wrappers };
}

function readerOf(type: string): (value: unknown) => unknown {
  if (type === 'number') return asNumber;
  if (type === 'boolean') return asBoolean;
  return asIs;
}

function nodesOf(shape: z.ZodRawShape, prefix: string[]): Node[] {
  return Object.entries(shape).map(([key, schema]): Node => {
    const path = [...prefix, key];
    const definition = produced(schema as z.ZodType);
    if (definition.shape) return { key, children: nodesOf(definition.shape, path) };
    const absentWhenNull = definition.wrappers[0] === 'optional' && !definition.wrappers.includes('nullable');
    return { key, column: { field: path.join('.'), name: path.map(snakeCase).join('_'), read: readerOf(definition.type), absentWhenNull } };
  });
}

const leavesOf = (nodes: Node[]): Column[] => nodes.flatMap((node) => ('column' in node ? [node.column] : leavesOf(node.children)));

type Row = Record<string, unknown>;

/** Builds the fields of a row, nested objects included, in declaration order. */
function readerOfNodes(nodes: Node[]): (row: Row) => Record<string, unknown> {
  const readers = nodes.map((node): [string, (row: Row) => unknown] =>
    'column' in node ? [node.key, (row) => node.column.read(row[node.column.name])] : [node.key, readerOfNodes(node.children)],
  );
  const absentWhenNull = new Set(nodes.flatMap((node) => ('column' in node && node.column.absentWhenNull ? [node.key] : [])));
  return (row) => {
    const fields: Record<string, unknown> = {};
    for (const [key, read] of readers) {
      const value = read(row);
      if (value !== null || !absentWhenNull.has(key)) fields[key] = value;
    }
    return fields;
  };
}

/** The columns of `shape`'s fields, and how fields become a row's values and a row the fields. */
export function columnsOf<F>(shape: z.ZodRawShape) {
  const nodes = nodesOf(shape, []);
  const columns = leavesOf(nodes);
  const paths = columns.map(({ field }) => field.split('.'));
  return {
    columns,
    /** The values of `columns`, in their order; an absent optional field is NULL. */
    toRow: (fields: F) =>
      paths.map((path) => {
        let value: unknown = fields;
        for (const key of path) value = (value as Row | undefined)?.[key];
        return value ?? null;
      }),
    fromRow: readerOfNodes(nodes) as (row: Row) => F,
  };
}
