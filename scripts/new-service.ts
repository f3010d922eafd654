/**
 * `npm run new-service -- <name> [--owner none|writes|all]`: a new resource service, `<name>-service/`, with a sample resource
 * (fields, table, migration, example) on the generic resource engine, registered in services.json
 * and in the build, Compose and Kubernetes; then prints what to edit next
 * (docs/adding-a-service.md says the same at more length).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { OWNERSHIPS, type Ownership } from '../shared/src/platform/ownership-policy.ts';
import { readServiceList, SERVICES_FILE } from '../shared/src/platform/services.ts';
import { serviceFiles } from './new-service/templates.ts';
import { registrations } from './new-service/registrations.ts';

const root = fileURLToPath(new URL('../', import.meta.url));

// MySQL reserved words a service (and so its table) could plausibly be named: the resource engine
// does not quote table names.
const RESERVED = new Set(['order', 'group', 'key', 'index', 'table', 'select', 'range', 'rank', 'rows', 'schema', 'check', 'condition', 'release', 'usage', 'user']);

function fail(message: string): never {
  console.error(`${message}
usage: npm run new-service -- <name> [--owner none|writes|all]   (e.g. orders: serves /api/orders from orders-service/)
  --owner  who may see and change a record, by the caller that created it: none (anyone with the
           scopes, the default), writes (everyone reads, only its owner changes it), all (only its
           owner sees or changes it: personal data)`);
  process.exit(2);
}

const parsed = (() => {
  try {
    return parseArgs({ allowPositionals: true, options: { owner: { type: 'string', default: 'none' }, help: { type: 'boolean', short: 'h' } } });
  } catch (error) {
    return fail((error as Error).message);
  }
})();
const [name, ...rest] = parsed.positionals;
if (name === undefined || parsed.values.help) fail('Creates <name>-service/ with a sample resource and registers it.');
const owner = parsed.values.owner as Ownership;
if (!OWNERSHIPS.includes(owner)) fail(`--owner ${owner}: one of ${OWNERSHIPS.join(', ')}`);
if (rest.length > 0) fail(`one name only (got ${[name, ...rest].join(' ')})`);
if (!/^[a-z][a-z0-9]{0,30}$/.test(name)) fail(`"${name}": a name is 1 to 31 lower-case letters or digits, starting with a letter`);
if (RESERVED.has(name)) fail(`"${name}" is a MySQL reserved word: choose another name (e.g. ${name}s)`);
const services = readServiceList();
if (services.some((service) => service.name === name)) fail(`services.json already has "${name}"`);
const workspace = `${name}-service`;
if (existsSync(path.join(root, workspace))) fail(`${workspace}/ already exists`);
if (['gateway', 'shared'].includes(name)) fail(`"${name}" is taken by a workspace`);

const port = Math.max(...services.map((service) => service.port)) + 1;

for (const [file, text] of Object.entries(serviceFiles(name, owner))) {
  const target = path.join(root, workspace, file);
  mkdirSync(path.dirname(target), { recursive: true });
  writeFileSync(target, text);
}
const changed = registrations({ name, port, owner, servicesFile: SERVICES_FILE, root });
for (const { file, update } of changed) {
  const target = path.join(root, file);
  writeFileSync(target, update(readFileSync(target, 'utf8')));
}

console.log(`Created ${workspace}/ (port ${port}) and registered it in ${changed.map(({ file }) => file).join(', ')}.

Next:
  npm install                 links the new workspace (and records it in package-lock.json)
  npm run build               compiles it and adds /api/${name} to openapi.json (commit that file)
  npm start                   serves /api/${name} through the gateway on 127.0.0.1:8080
  npm test                    runs the shared suites for it too

Then make the sample resource yours:
  ${workspace}/src/domain/${name}.ts       its fields, rules, filter and example
  ${workspace}/src/data/${name}-table.ts   how the fields map to columns (and npm run seed's rows)
  ${workspace}/migrations/0001_create_${name}.sql   its table
  ${workspace}/test/api-case.ts           bodies the shared API suites send
  services.json                        cachedReads / publicReads / owner (${owner}) for /api/${name}
See docs/adding-a-service.md.`);
