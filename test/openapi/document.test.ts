/**
 * openapi.json: up to date with the code, its examples valid, and its request schemas in agreement
 * with the zod schemas the services validate with.
 */
import { readFileSync } from 'node:fs';
import { serializeDocument } from '@app/shared/api-description/openapi';
import { problemKinds, problemTypes } from '@app/shared/platform/problem';
import { ownershipOf } from '@app/shared/platform/services';
import { representation, type ResourceDefinition } from '@app/shared/resource/rules';
import { serviceDocument } from '@app/shared/service';
import type { oas31 } from 'zod-openapi';
import { gatewayDocument, proxiedPaths } from '../../gateway/src/own-endpoints/api-description.js';
import { productsResource } from '../../products-service/src/domain/products.js';
import { apiDocument, OPENAPI_FILE } from '../../scripts/openapi.js';
import { serviceModules } from '../../tools/services.js';
import { usersResource } from '../../users-service/src/domain/users.js';
import { service as usersService } from '../../users-service/src/app.js';
import { Contract, type OpenApiDocument, type Operation } from '../support/contract.js';

const modules = await serviceModules('src');
const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });
const deadlines = { upstreamMs: 10_000, requestBodyMs: 30_000 };
const users = { name: 'users', url: 'http://users', prefix: '/api/users' };

const committed = readFileSync(OPENAPI_FILE, 'utf8');
const document = JSON.parse(committed) as OpenApiDocument;
const contract = new Contract(document);
const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const;
const operations = Object.entries(document.paths).flatMap(([path, item]) =>
  METHODS.flatMap((method) => (item[method] ? [{ path, method, operation: item[method] as Operation }] : [])),
);

test('openapi.json is what the code generates (else: npm run openapi)', async () => {
  const fresh = serializeDocument(await apiDocument());
  if (fresh !== committed) {
    const [line] = fresh.split('\n').flatMap((text, i) => (text === committed.split('\n')[i] ? [] : [`line ${i + 1}: ${text.trim()}`]));
    throw new Error(`openapi.json is out of date: run npm run openapi (first difference at ${line})`);
  }
});

describe('the document', () => {
  it('lists every problem type, in the schema and the description', () => {
    const uris = problemKinds().map((kind) => `https://problems.example/${kind}`);
    expect((document.components.schemas?.ProblemType as oas31.SchemaObject).enum).toEqual(uris);
    for (const uri of uris) expect(document.info.description).toContain(uri);
  });

  it('has valid examples: every parameter, header, request body and response example matches its schema', () => {
    const checked: string[] = [];
    const check = (where: string, schema: unknown, example: unknown) => {
      if (example === undefined) return;
      checked.push(where);
      expect({ where, errors: contract.schemaErrors(schema as oas31.SchemaObject, example) }).toEqual({ where, errors: [] });
    };
    for (const { path, method, operation } of operations) {
      const at = `${method.toUpperCase()} ${path}`;
      for (const parameter of [...(document.paths[path]!.parameters ?? []), ...(operation.parameters ?? [])].map((p) => contract.resolve<oas31.ParameterObject>(p))) {
        check(`${at} parameter ${parameter.name}`, parameter.schema, parameter.example);
      }
      for (const [type, media] of Object.entries(operation.requestBody?.content ?? {})) check(`${at} request ${type}`, media.schema, media.example);
      for (const [status, response] of Object.entries(operation.responses) as [string, oas31.ResponseObject][]) {
        for (const [type, media] of Object.entries(response.content ?? {})) check(`${at} ${status} ${type}`, media.schema, media.example);
        for (const [name, header] of Object.entries(response.headers ?? {})) {
          const { schema, example } = contract.resolve<oas31.HeaderObject>(header);
          check(`${at} ${status} header ${name}`, schema, example);
        }
      }
    }
    expect(checked.length).toBeGreaterThan(100);
  });

  it('describes a client error for every operation under /api but OPTIONS (Redocly’s operation-4xx-response is off for the others)', () => {
    const without = operations.filter(({ path, method, operation }) => path.startsWith('/api/') && method !== 'options' && !Object.keys(operation.responses).some((s) => s.startsWith('4')));
    expect(without).toEqual([]);
  });

  it('describes X-Request-Id on every response, and the gateway’s failures and cache headers on everything under /api', () => {
    for (const { path, method, operation } of operations) {
      for (const [status, response] of Object.entries(operation.responses)) {
        expect({ at: `${method} ${path} ${status}`, header: response.headers?.['X-Request-Id'] }).toEqual({ at: `${method} ${path} ${status}`, header: ref('headers', 'XRequestId') });
        if (path.startsWith('/api/') && (method === 'get' || method === 'head')) expect(Object.keys(response.headers ?? {})).toEqual(expect.arrayContaining(['X-Cache', 'Age']));
      }
      if (path.startsWith('/api/')) expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(method === 'options' ? ['502', '504'] : ['500', '502', '504']));
    }
  });

  it("describes each service's ownership: admin scope, a 403 for another owner only where one is answered, who sees the owner field", () => {
    const refused: string[] = [];
    for (const { path, method, operation } of operations) {
      const prefix = /^\/api\/[^/]+/.exec(path)?.[0];
      if (prefix === undefined || method === 'options') continue;
      const name = prefix.slice('/api/'.length);
      const ownership = ownershipOf(name);
      expect({ path, method, security: operation.security }).toEqual({ path, method, security: expect.arrayContaining([{ bearerAuth: [`${name}:admin`] }]) });
      // Another owner's record: a 403 where every reader sees it but only its owner changes it;
      // where owners alone see theirs, a 404. Creating for another owner: a 403 where records have owners.
      const item = path !== prefix;
      const notOwner = (ownership === 'writes' && item && ['put', 'patch', 'delete'].includes(method)) || (ownership !== 'none' && !item && method === 'post');
      if (String(operation.responses['403']?.description).includes(problemTypes['not-owner'].title) !== notOwner) refused.push(`${method} ${path}`);
    }
    expect(refused).toEqual([]);
    const users = document.components.schemas?.User as oas31.SchemaObject;
    expect((users.properties?.owner as oas31.SchemaObject).description).toContain(ownershipOf('users') === 'all' ? 'see or change it' : 'change it');
  });

  it('has no operation whose HEAD is missing, and OPTIONS on every path', () => {
    for (const [path, item] of Object.entries(document.paths)) {
      expect({ path, head: Boolean(item.head), options: Boolean(item.options) }).toEqual({ path, head: Boolean(item.get), options: true });
    }
  });
});

describe('each service’s own description', () => {
  it.each(modules.map(({ entry, service }) => [entry.workspace, service, entry.prefix] as const))('%s describes its routes, probes and document, without what only the gateway adds', (_name, service, prefix) => {
    const own = serviceDocument(service);
    expect(Object.keys(own.paths ?? {})).toEqual(['/healthz', '/readyz', '/openapi.json', prefix, `${prefix}/{id}`]);
    const text = JSON.stringify(own);
    for (const gatewayOnly of ['X-Cache', '"502"', '"504"', '/docs']) expect(text).not.toContain(gatewayOnly);
    // Every component it references, it defines; every component it defines, it references.
    const referenced = new Set([...text.matchAll(/"\$ref":"#\/components\/(\w+)\/(\w+)"/g)].map(([, kind, name]) => `${kind}.${name}`));
    const defined = Object.entries(own.components ?? {}).flatMap(([kind, entries]) => Object.keys(entries as object).map((name) => `${kind}.${name}`));
    expect(new Set(defined)).toEqual(referenced);
  });

  it('is merged by the gateway with only the paths that upstream serves', () => {
    const own = JSON.parse(JSON.stringify(serviceDocument(usersService))) as OpenApiDocument;
    own.paths['/api/unlisted'] = own.paths['/api/users']!;
    expect(Object.keys(proxiedPaths(users, own, deadlines))).toEqual(['/api/users', '/api/users/{id}']);
  });

  it('cannot be merged with a part that defines a shared component differently', () => {
    const own = serviceDocument(usersService) as OpenApiDocument;
    const other = { ...own, components: { ...own.components, schemas: { ...own.components.schemas, User: { type: 'object' } } } } as OpenApiDocument;
    expect(() => gatewayDocument([{ upstream: users, document: own }, { upstream: { ...users, name: 'other' }, document: other }], deadlines)).toThrow('Two different definitions of components.schemas.User');
  });

  it("renders the problem schemas anew, with the gateway features' types that a service's process does not know", async () => {
    const withoutFeatureTypes = (document: OpenApiDocument) => {
      const schemas = Object.entries(document.components.schemas ?? {}).map(([name, schema]) => [name, name.startsWith('Problem') ? { description: 'without the gateway features\' types' } : schema]);
      return { ...document, components: { ...document.components, schemas: Object.fromEntries(schemas) } };
    };
    expect(serializeDocument(await apiDocument((service) => withoutFeatureTypes(serviceDocument(service) as OpenApiDocument)))).toBe(committed);
  });
});

/**
 * Request bodies: what the service accepts, the document must accept. Where the document is looser
 * (JSON Schema cannot say it), the case is listed; the service answers those with a 400 problem,
 * which the document describes.
 */
describe('request schemas agree with the zod schemas', () => {
  const READ_ONLY = ['id', 'createdAt', 'updatedAt'];
  const looser = 'only the service rejects it';

  function agreement(definition: ResourceDefinition<Record<string, unknown>>, name: string, cases: [string, unknown, boolean | typeof looser][]) {
    return it.each(cases)(`${name}: %s`, (_what, body, expected) => {
      const fields = Object.fromEntries(Object.entries(body as object).filter(([field]) => !READ_ONLY.includes(field)));
      const parsed = definition.fields.safeParse(fields);
      const documentAccepts = contract.schemaErrors(ref('schemas', `${name}Input`), body).length === 0;
      if (expected === looser) {
        expect({ service: parsed.success, document: documentAccepts }).toEqual({ service: false, document: true });
        return;
      }
      expect({ service: parsed.success, document: documentAccepts }).toEqual({ service: expected, document: expected });
      if (parsed.success) {
        // …and what the service makes of it matches the response schema.
        const stored = { id: '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40', owner: 'ada', version: 1, createdAt: new Date(), updatedAt: new Date(), fields: parsed.data };
        const owned = ownershipOf(`${definition.name}s`) !== 'none';
        expect(contract.schemaErrors(ref('schemas', name), representation(stored, owned))).toEqual([]);
      }
    });
  }

  const ada = { email: 'ada@example.com', name: 'Ada Lovelace' };
  agreement(usersResource as never, 'User', [
    ['the example', ada, true],
    ['read-only fields, ignored', { ...ada, id: 'x', createdAt: 1, updatedAt: null }, true],
    ['a name with surrounding white space', { ...ada, name: '  Ada  ' }, true],
    ['200 astral characters (code points, not UTF-16 units)', { ...ada, name: '😀'.repeat(200) }, true],
    ['201 characters', { ...ada, name: 'x'.repeat(201) }, false],
    ['201 astral characters', { ...ada, name: '😀'.repeat(201) }, false],
    ['a blank name', { ...ada, name: '   ' }, false],
    ['an invalid email', { ...ada, email: 'not-an-email' }, false],
    ['a missing field', { email: ada.email }, false],
    ['an unknown field', { ...ada, color: 'red' }, false],
    ['200 characters and white space around them', { ...ada, name: ` \n${'x'.repeat(100)} ${'x'.repeat(99)}\t ` }, true],
    ['201 characters and white space around them', { ...ada, name: ` ${'x'.repeat(201)} ` }, false],
    ['one character and white space around it', { ...ada, name: ' x ' }, true],
  ]);

  const widget = productsResource.example;
  agreement(productsResource as never, 'Product', [
    ['the example', widget, true],
    ['only the required fields', { sku: 'A', name: 'B', price: { amount: '0', currency: 'USD' } }, true],
    ['an amount with leading zeros and one fraction digit', { ...widget, price: { amount: '0019.9', currency: 'EUR' } }, true],
    ['an amount as a JSON number', { ...widget, price: { amount: 19.99, currency: 'EUR' } }, false],
    ['an amount with 3 fraction digits', { ...widget, price: { amount: '19.999', currency: 'EUR' } }, false],
    ['a negative amount', { ...widget, price: { amount: '-1', currency: 'EUR' } }, false],
    ['an amount of 10^10', { ...widget, price: { amount: '10000000000', currency: 'EUR' } }, false],
    ['a lower-case currency', { ...widget, price: { amount: '1', currency: 'eur' } }, false],
    ['an unknown field in price', { ...widget, price: { amount: '1', currency: 'EUR', vat: true } }, false],
    ['a sku with a space', { ...widget, sku: 'has space' }, false],
    ['a fractional stock', { ...widget, stock: 1.5 }, false],
    ['a stock of 2^31', { ...widget, stock: 2 ** 31 }, false],
    ['a description of 5001 characters', { ...widget, description: 'x'.repeat(5001) }, false],
    ['three capital letters that are no ISO 4217 code', { ...widget, price: { amount: '1', currency: 'XYZ' } }, looser],
  ]);

  it.each<[string, string, unknown, boolean]>([
    ['User', 'a new name', { name: 'Ada King' }, true],
    ['User', 'nothing', {}, true],
    ['User', 'null for a required field', { name: null }, false],
    ['Product', 'a new amount, merged into the price', { price: { amount: '5.5' } }, true],
    ['Product', 'null for a field with a default', { description: null, stock: null }, true],
    ['Product', 'null for a required nested field', { price: { currency: null } }, false],
  ])('%s merge patch: %s', (name, _what, patch, valid) => {
    expect(contract.schemaErrors(ref('schemas', `${name}Patch`), patch).length === 0).toBe(valid);
  });
});

test('a response the document describes for HEAD has no body', () => {
  for (const { method, operation } of operations) {
    if (method === 'head') for (const response of Object.values(operation.responses) as oas31.ResponseObject[]) expect(response.content).toBeUndefined();
  }
});
