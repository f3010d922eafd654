/**
 * Done when: a client generated from openapi.json by a standard generator works against the running
 * gateway without hand edits, and a contract-checking proxy between it and the gateway reports no
 * violation. Generator: openapi-typescript (types) with openapi-fetch (the client).
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { defaultToken } from '../support/auth.js';
import { startContractProxy, type ContractProxy } from '../support/contract-proxy.js';
import { OPENAPI_FILE } from '../support/contract.js';
import { startStack } from '../support/stack.js';

const clientDirectory = new URL('../generated-client/', import.meta.url);
let stack: Awaited<ReturnType<typeof startStack>>;
let proxy: ContractProxy;

beforeAll(async () => {
  stack = await startStack();
  proxy = await startContractProxy(stack.gateway.url);
});
afterAll(async () => {
  await proxy.close();
  await stack.close();
});

test('openapi-typescript generates types from openapi.json that the client program compiles against, unedited', async () => {
  // defaultNonNullable: false, as the README says: openapi-typescript 7 otherwise makes a request
  // body's fields with a default required (openapi-ts/openapi-typescript#2012). Responses list every
  // field as required and carry no defaults, so they lose nothing.
  const types = astToString(await openapiTS(OPENAPI_FILE, { defaultNonNullable: false }));
  writeFileSync(new URL('openapi.d.ts', clientDirectory), types);
  const program = ts.createProgram([fileURLToPath(new URL('round-trip.ts', clientDirectory))], {
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2024,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2024.d.ts', 'lib.dom.d.ts'],
    types: [],
  });
  const diagnostics = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const where = diagnostic.file ? `${diagnostic.file.fileName}:${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line + 1}: ` : '';
    return where + ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
  });
  expect(diagnostics).toEqual([]);
}, 60_000);

test('the generated client does a whole round trip through a contract-checking proxy, with no violation', async () => {
  // Not a literal specifier: tsc would follow it and type-check the program before its types exist
  // (the test above checks it, against the types it generated).
  const program = '../generated-client/round-trip.js';
  const { roundTrip } = (await import(program)) as { roundTrip(baseUrl: string, unique: string, token: string): Promise<string[]> };
  const steps = await roundTrip(proxy.url, String(Date.now()), defaultToken);
  expect(steps).toEqual([
    'healthz: 200',
    'readyz: 200',
    'openapi.json: 200',
    'create a user: 201',
    'read it: 200',
    'read it again if changed: 304',
    'HEAD: 200',
    'replace it: 200',
    'a write with a stale ETag: 412',
    'merge-patch it: 200',
    'find it by email: 200',
    'walk every page: 200',
    'create another with the same email: 409',
    'which methods: 204',
    'delete it: 204',
    'read it once deleted: 404',
    'create a product: 201',
    'retry the create with the same key: 201',
    'merge-patch its price: 200',
    'find it by sku: 200',
    'delete the product: 204',
  ]);
  expect(proxy.violations).toEqual([]);
  expect(proxy.exchanges.length).toBeGreaterThanOrEqual(steps.length);
});
