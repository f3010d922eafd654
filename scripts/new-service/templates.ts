/**
 * The files of a new service: a sample resource on the generic resource engine, written as
 * users-service and products-service are, so the three read alike. `name` is the plural the path
 * uses (`orders`); the sample resource is one of them (`order`).
 */
import { readFileSync } from 'node:fs';
import { ownershipPolicy, type Ownership } from '../../shared/src/platform/ownership-policy.ts';

/** The start script a service runs with (its Node options, the telemetry preload): users-service's. */
const START_SCRIPT = (JSON.parse(readFileSync(new URL('../../users-service/package.json', import.meta.url), 'utf8')) as { scripts: { start: string } }).scripts.start;

/**
 * The deployment files a new service starts from: users-service's, with its name replaced. In k8s only
 * what sets a service apart (its name, image and dev credentials): k8s/components/service makes the rest.
 */
const DEPLOY_FILES = ['compose.env', 'mysql.env', 'k8s/kustomization.yaml', 'k8s/service.yaml', 'k8s/dev/kustomization.yaml', 'k8s/dev/database-secret.yaml'];

function deployFiles(name: string): Record<string, string> {
  const renamed = (text: string) => text.replaceAll('USERS_DB_PASSWORD', `${name.toUpperCase()}_DB_PASSWORD`).replaceAll(/\busers\b/g, name);
  return Object.fromEntries(DEPLOY_FILES.map((file) => [`deploy/${file}`, renamed(readFileSync(new URL(`../../users-service/deploy/${file}`, import.meta.url), 'utf8'))]));
}

/**
 * The owner column and the unique index of the sample table. An owner is binary, so that SQL
 * compares subjects byte for byte (docs/api.md); where the ownership policy says so (only the
 * owner sees a record), a unique field is unique within its owner (`owner_key`: '' for rows
 * without one, as NULLs never collide), so that a 409 tells no one what another owner has; the
 * filter on it keeps an index of its own.
 */
function ownerColumns(name: string, owner: Ownership): { columns: string; unique: string } {
  if (!ownershipPolicy(owner).uniqueWithinOwner) return { columns: '  owner VARBINARY(1020) NULL,\n', unique: `  UNIQUE KEY uq_${name}_reference (reference),\n` };
  return {
    columns: "  owner VARBINARY(1020) NULL,\n  owner_key VARBINARY(1020) AS (IFNULL(owner, '')) STORED,\n",
    unique: `  UNIQUE KEY uq_${name}_reference (owner_key, reference),\n  KEY ix_${name}_reference (reference),\n`,
  };
}

export function serviceFiles(name: string, owner: Ownership): Record<string, string> {
  const { columns: ownerColumn, unique } = ownerColumns(name, owner);
  const workspace = `${name}-service`;
  const one = name.endsWith('s') && name.length > 1 ? name.slice(0, -1) : name;
  const One = one[0]!.toUpperCase() + one.slice(1);
  const Many = name[0]!.toUpperCase() + name.slice(1);
  return {
    ...deployFiles(name),
    'package.json': `${JSON.stringify(
      {
        name: workspace,
        version: '1.0.0',
        private: true,
        description: `The ${name} service: /api/${name} backed by its own MySQL schema.`,
        type: 'module',
        engines: { node: '>=24 <25' },
        scripts: { start: START_SCRIPT, migrate: 'exec node dist/migrate.js' },
        dependencies: { '@app/shared': '^1.0.0', zod: '^4.6.7' },
      },
      null,
      2,
    )}\n`,
    'tsconfig.json': `{
  "extends": "../tsconfig.base.json",
  "compilerOptions": { "rootDir": "src", "outDir": "dist" },
  "include": ["src"],
  "references": [{ "path": "../shared" }]
}
`,
    'src/config.ts': `import { serviceDefaults } from '@app/shared/platform/services';
import { serviceConfigSchema } from '@app/shared/service';

/** Its name, port and database from its entry in services.json. */
export const defaults = serviceDefaults('${name}');

/** The environment this process reads (validated at start-up). */
export const configSchema = serviceConfigSchema(defaults);
`,
    'src/main.ts': `import { runService } from '@app/shared/service';
import { service } from './app.js';

await runService(service);
`,
    'src/migrate.ts': `import { runMigrations } from '@app/shared/service';
import { service } from './app.js';

await runMigrations(service);
`,
    'src/app.ts': `import { MySqlStore } from '@app/shared/resource/store';
import { createServiceApp, type ServiceDefinition, type ServiceDependencies } from '@app/shared/service';
import { defaults } from './config.js';
import { ${name}Seed, ${name}Table } from './data/${name}-table.js';
import { create${Many}Service } from './domain/${name}.js';
import { ${name}Api, ${name}Routes } from './routes/${name}.js';

export const service: ServiceDefinition = {
  ...defaults,
  migrations: new URL('../migrations/', import.meta.url),
  seed: ${name}Seed,
  api: ${name}Api,
  routes: (db, idempotency, bodyLimitBytes) => ${name}Routes(create${Many}Service(new MySqlStore(db, ${name}Table)), idempotency, bodyLimitBytes),
};

/** The ${name} API as an express app, from its dependencies. It does not listen. */
export const createApp = (dependencies: ServiceDependencies) => createServiceApp(service, dependencies);
`,
    [`src/domain/${name}.ts`]: `import { filters, type FilterValues } from '@app/shared/resource/filters';
import { ResourceService, type ResourceDefinition, type ResourceStore } from '@app/shared/resource/rules';
import { text } from '@app/shared/platform/validation';
import { z } from 'zod';

// A sample resource: replace its fields with yours (and the migration with them). Each field is a
// column named as it is in snake case (customerId: customer_id); a nested object's fields are
// columns prefixed with its name (price.amount: price_amount).
const MAX_QUANTITY = 2 ** 31 - 1;
const STATUSES = ['open', 'shipped', 'closed'] as const;
const reference = z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1 to 64 of A-Z a-z 0-9 . _ -');
const quantity = z.int('must be a whole number').min(0, \`must be from 0 to \${MAX_QUANTITY}\`).max(MAX_QUANTITY, \`must be from 0 to \${MAX_QUANTITY}\`);

export const ${one}Fields = z.strictObject({
  reference: reference.meta({ description: 'Unique.' }),
  customerId: z.uuid('must be a UUID'),
  title: text(1, 200, { trim: true }),
  quantity,
  status: z.enum(STATUSES, \`must be one of \${STATUSES.join(', ')}\`).default('open'),
  note: text(0, 2000).default(''),
});

export type ${One}Fields = z.infer<typeof ${one}Fields>;

/**
 * The list's filters, one of each kind: \`?reference=\` (a string, exact), \`?customerId=\` (a
 * UUID), \`?status=\` (one of the enum) and \`?minQuantity=&maxQuantity=\` (an integer range;
 * \`filters.integer\` for one value). Each parses its text with the rule given (a bad value is a
 * 400) and compares its field's column, which the migration indexes.
 */
export const ${one}Filter = {
  reference: filters.exact('reference', reference),
  customerId: filters.uuid('customerId'),
  status: filters.oneOf('status', STATUSES),
  ...filters.range('quantity', quantity),
};

export type ${One}Filter = FilterValues<typeof ${one}Filter>;

export type ${Many}Service = ResourceService<${One}Fields, ${One}Filter>;

export const ${name}Resource: ResourceDefinition<${One}Fields, typeof ${one}Filter> = {
  name: '${one}',
  fields: ${one}Fields,
  filter: ${one}Filter,
  example: { reference: 'A-1001', customerId: '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40', title: 'First ${one}', quantity: 3, status: 'open', note: 'An example.' },
};

export function create${Many}Service(store: ResourceStore<${One}Fields, ${One}Filter>): ${Many}Service {
  return new ResourceService(${name}Resource, store);
}
`,
    [`src/data/${name}-table.ts`]: `import { tableOf } from '@app/shared/resource/store';
import type { SeedColumns } from '@app/shared/service';
import { ${name}Resource } from '../domain/${name}.js';

/** The table: a column per field and a condition per filter, from the resource; a 409 per unique index. */
export const ${name}Table = tableOf(${name}Resource, {
  table: '${name}',
  uniqueIndexes: { uq_${name}_reference: { field: 'reference', message: 'is already taken' } },
});

/** Generated rows for \`npm run seed\`: valid for the API, unique per run. */
export const ${name}Seed: SeedColumns = {
  table: '${name}',
  columns: {
    reference: "CONCAT('SEED-', @tag, '-', n)",
    customer_id: 'UUID()',
    title: "CONCAT('${One} ', n)",
    quantity: 'n % 1000',
    status: "ELT(1 + n % 3, 'open', 'shipped', 'closed')",
    note: "''",
  },
};
`,
    [`src/routes/${name}.ts`]: `import { API_PREFIX } from '@app/shared/platform/services';
import type { IdempotencyStore } from '@app/shared/resource/idempotency';
import { resourceEndpoints, resourceRoutes } from '@app/shared/resource/routes';
import { defaults } from '../config.js';
import { ${name}Resource, type ${Many}Service } from '../domain/${name}.js';

const path = \`\${API_PREFIX}/${name}\`;

/** \`/api/${name}\` (list, create) and \`/api/${name}/{id}\` (read, replace, patch, delete). */
export const ${name}Routes = (${name}: ${Many}Service, idempotency: IdempotencyStore, bodyLimitBytes?: number) => resourceRoutes(path, ${name}, idempotency, defaults.ownership, bodyLimitBytes);

/** The same declaration, for the description. */
export const ${name}Api = resourceEndpoints(path, ${name}Resource, defaults.ownership, defaults.bodyLimitBytes);
`,
    [`migrations/0001_create_${name}.sql`]: `-- ${Many}. \`id\` is a UUIDv7 in 16 bytes (creation-ordered: keyset pages walk the primary key).
-- Every filtered column has an index (InnoDB appends the id, so a filtered page reads in id order).
-- Never edit this file once applied: a change is a new file (0002_…), which the release before it
-- must still work with while a rolling update runs both. Add a column with a default first, drop one
-- only once no release uses it: expand, then contract (docs/deploy.md, "Changing a schema across a rolling update").
CREATE TABLE ${name} (
  id BINARY(16) NOT NULL,
${ownerColumn}  reference VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  customer_id CHAR(36) CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL,
  title VARCHAR(200) NOT NULL,
  quantity INT NOT NULL,
  status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  note TEXT NOT NULL,
  version INT UNSIGNED NOT NULL,
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  KEY ix_${name}_owner (owner, id),
${unique}  KEY ix_${name}_customer_id (customer_id),
  KEY ix_${name}_status (status),
  KEY ix_${name}_quantity (quantity)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`,
    'test/api-case.ts': `import type { ResourceCase } from '../../test/support/resource-case.js';
import { ${one}Filter } from '../src/domain/${name}.js';

/** A customer's id for \`n\`: two bodies differ in every filtered field. */
const customerOf = (n: number) => \`00000000-0000-4000-8000-\${String(n % 1e12).padStart(12, '0')}\`;

/** ${Many}, for the per-resource suites (test/support/resource-case.ts). */
export const apiCase: ResourceCase = {
  valid: (n) => ({ reference: \`REF-\${n}\`, customerId: customerOf(n), title: \`${One} \${n}\`, quantity: n, status: ['open', 'shipped', 'closed'][n % 3], note: 'Sample.' }),
  echoed: (body) => ({ status: 'open', note: '', ...body }),
  invalid: { body: { reference: 'has space', customerId: 'x', title: '  ', quantity: 1.5 }, paths: ['reference', 'customerId', 'title', 'quantity'] },
  required: 'title',
  patch: { body: { quantity: 7 }, expected: { quantity: 7 } },
  filters: ${one}Filter,
  unique: {
    field: 'reference',
    duplicateOf: (body, n) => ({ reference: body.reference, customerId: customerOf(n), title: \`Other \${n}\`, quantity: 1 }),
  },
};
`,
    [`test/${name}.test.ts`]: `/**
 * The rules of ${aOrAn(one)} ${one} that are its own, against the ${name} service and its real MySQL schema. The
 * conventions every resource shares are in test/e2e/api-conventions.test.ts.
 */
import { client, expectProblem, type Client } from '../../test/support/http.js';
import { startService, type RunningService } from '../../test/support/stack.js';
import { createApp, service } from '../src/app.js';

let ${name}: RunningService;
let api: Client;

beforeAll(async () => {
  ${name} = await startService(service, createApp);
  api = client(${name}.url);
});
afterAll(() => ${name}.close());

const customerId = '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40';

it('creates ${aOrAn(one)} ${one}, its status defaulting to open and its note to empty', async () => {
  const response = await api.post('/api/${name}', { reference: 'T-1', customerId, title: '  Trimmed  ', quantity: 0 });
  expect(response.status).toBe(201);
  expect(response.body).toMatchObject({ reference: 'T-1', customerId, title: 'Trimmed', quantity: 0, status: 'open', note: '' });
});

it('says a missing quantity is required, and a fractional one is not a whole number', async () => {
  expect(expectProblem(await api.post('/api/${name}', { reference: 'T-2', customerId, title: 'x' }), 400, 'validation').errors).toEqual([{ path: 'quantity', message: 'is required' }]);
  expect(expectProblem(await api.post('/api/${name}', { reference: 'T-3', customerId, title: 'x', quantity: 1.5 }), 400, 'validation').errors).toEqual([
    { path: 'quantity', message: 'must be a whole number' },
  ]);
});

it('answers a filter value its rule refuses with a 400 naming the parameter', async () => {
  const errorsOf = async (query: string) => expectProblem(await api.get(\`/api/${name}?\${query}\`), 400, 'validation').errors;
  expect(await errorsOf('minQuantity=abc')).toEqual([{ path: 'minQuantity', message: 'must be a whole number' }]);
  expect(await errorsOf('maxQuantity=-1')).toEqual([{ path: 'maxQuantity', message: \`must be from 0 to \${2 ** 31 - 1}\` }]);
  expect(await errorsOf('customerId=x')).toEqual([{ path: 'customerId', message: 'must be a UUID' }]);
  expect(await errorsOf('status=lost')).toEqual([{ path: 'status', message: 'must be one of open, shipped, closed' }]);
});
`,
  };
}

function aOrAn(word: string): string {
  return /^[aeiou]/.test(word) ? 'an' : 'a';
}
