/**
 * fast-check arbitraries from the JSON Schemas of openapi.json: values a schema accepts, and
 * hostile variants of them. Covers the JSON Schema the document uses (`$ref`, `anyOf`/`oneOf`,
 * `const`, `enum`, type lists, objects with `required` and `readOnly` members, strings with
 * `pattern`/lengths, bounded integers); anything else is any JSON value. No maintained package
 * maps JSON Schema 2020-12 with OpenAPI's `readOnly` to fast-check, hence this small one.
 */
import fc from 'fast-check';
import type { oas31 } from 'zod-openapi';

type Schema = oas31.SchemaObject;
type Reference = oas31.ReferenceObject;
import type { Contract } from './contract.js';

type Node = Schema & {
  $ref?: string;
  anyOf?: Node[];
  oneOf?: Node[];
  const?: unknown;
  enum?: unknown[];
  type?: string | string[];
  properties?: Record<string, Node>;
  required?: string[];
  readOnly?: boolean;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
};

const codePoints = (value: string) => [...value].length;

/** Values that `schema` accepts (most of the time: patterns are generated, then held to the lengths). */
export function validValue(contract: Contract, schema: Schema | Reference = {}): fc.Arbitrary<unknown> {
  const node = contract.resolve<Node>(schema as Node);
  const alternatives = node.anyOf ?? node.oneOf;
  if (alternatives) return fc.oneof(...alternatives.map((alternative) => validValue(contract, alternative)));
  if ('const' in node) return fc.constant(node.const);
  if (node.enum) return fc.constantFrom(...node.enum);
  if (Array.isArray(node.type)) return fc.oneof(...node.type.map((type) => validValue(contract, { ...node, type } as Node)));
  switch (node.type) {
    case 'object': {
      const writable = Object.entries(node.properties ?? {}).filter(([, property]) => !contract.resolve<Node>(property).readOnly);
      const shape = Object.fromEntries(writable.map(([name, property]) => [name, validValue(contract, property)]));
      return fc.record(shape, { requiredKeys: (node.required ?? []).filter((name) => name in shape) });
    }
    case 'string': {
      const { minLength = 0, maxLength = 300 } = node;
      const text = node.pattern ? fc.stringMatching(new RegExp(node.pattern)) : fc.string({ minLength, maxLength: Math.min(maxLength, 40) });
      return text.filter((value) => codePoints(value) >= minLength && codePoints(value) <= maxLength);
    }
    case 'integer':
      return fc.integer({ min: node.minimum ?? -(2 ** 31), max: node.maximum ?? 2 ** 31 - 1 });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    default:
      return fc.jsonValue();
  }
}

/** Values that break a rule: wrong types, out of range, malformed text, members JavaScript treats specially. */
const hostileMember = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom<unknown>(
    '',
    ' ',
    '\ud800',
    'a'.repeat(5_001),
    '\u0000',
    '<script>',
    "' OR 1=1 --",
    -1,
    2 ** 31,
    1e308,
    -0,
    0.1,
    '19.999',
    '1e3',
    true,
    null,
    [],
    {},
    { amount: '1.00' },
  ),
);

const memberName = fc.oneof(
  { arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype', 'id', 'createdAt', 'toString', 'hasOwnProperty', 'unknown', ''), weight: 3 },
  { arbitrary: fc.string({ maxLength: 12 }), weight: 1 },
);

/** `value` with one member replaced, removed or added (recursing into nested objects). */
function mutated(value: unknown): fc.Arbitrary<unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return hostileMember;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const edits: fc.Arbitrary<unknown>[] = [
    fc.tuple(memberName, hostileMember).map(([name, member]) => {
      const copy: Record<string, unknown> = { ...record };
      Object.defineProperty(copy, name, { value: member, enumerable: true, writable: true, configurable: true });
      return copy;
    }),
  ];
  if (keys.length > 0) {
    edits.push(
      fc.constantFrom(...keys).chain((key) =>
        fc.oneof(
          mutated(record[key]).map((member) => ({ ...record, [key]: member })),
          fc.constant(Object.fromEntries(Object.entries(record).filter(([name]) => name !== key))),
        ),
      ),
    );
  }
  return fc.oneof(...edits);
}

/** Request bodies for `schema`: valid ones, mutated ones, and arbitrary JSON. */
export function bodyValue(contract: Contract, schema: Schema | Reference): fc.Arbitrary<unknown> {
  const valid = validValue(contract, schema);
  return fc.oneof(
    { arbitrary: valid, weight: 6 },
    { arbitrary: valid.chain(mutated), weight: 3 },
    { arbitrary: fc.jsonValue({ maxDepth: 4 }), weight: 1 },
  );
}

const utf8 = (text: string) => Buffer.from(text);

/**
 * The bytes of a JSON body, as sent: mostly as JSON.stringify writes them (lone surrogates
 * escaped), sometimes broken on the wire: truncated, invalid UTF-8, nested past any limit, a BOM,
 * duplicate keys, trailing garbage.
 */
export function bodyBytes(value: fc.Arbitrary<unknown>): fc.Arbitrary<Buffer> {
  const json = value.map((body) => JSON.stringify(body) ?? 'null');
  return fc.oneof(
    { arbitrary: json.map(utf8), weight: 12 },
    { arbitrary: json.chain((text) => fc.nat({ max: Math.max(0, text.length - 1) }).map((cut) => utf8(text.slice(0, cut)))), weight: 1 },
    {
      arbitrary: fc
        .tuple(json, fc.constantFrom([0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80]))
        .map(([text, bad]) => {
          const at = Math.max(1, text.indexOf('"') + 1);
          return Buffer.concat([utf8(text.slice(0, at)), Buffer.from(bad), utf8(text.slice(at))]);
        }),
      weight: 1,
    },
    {
      arbitrary: fc
        .tuple(fc.integer({ min: 33, max: 20_000 }), fc.constantFrom('[', '{"a":'))
        .map(([depth, open]) => utf8(`${open.repeat(depth)}1${(open === '[' ? ']' : '}').repeat(depth)}`)),
      weight: 1,
    },
    { arbitrary: json.map((text) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8(text)])), weight: 1 },
    { arbitrary: json.map((text) => utf8(text.replace(/^\{/, '{"name":"a","name":"b",'))), weight: 1 },
    { arbitrary: json.map((text) => utf8(`${text} x`)), weight: 1 },
  );
}
