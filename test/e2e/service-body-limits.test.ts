/**
 * Each service's request body limit, from its entry in services.json (BODY_LIMIT_BYTES is only the
 * default): one body of 150 KiB is too large for one service and taken by the other, at the gateway
 * and at each service directly. Real gateway and services.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SERVICES_FILE, serviceDefaults } from '@app/shared/platform/services';
import { createServiceApp, type ServiceDefinition } from '@app/shared/service';
import { service as productsService } from '../../products-service/src/app.js';
import { service as usersService } from '../../users-service/src/app.js';
import { client, expectProblem } from '../support/http.js';
import { resourceCases } from '../support/resource-case.js';
import { startGateway, startService, type RunningGateway, type RunningService } from '../support/stack.js';

const KIB = 1024;
/** Users take bodies up to 256 KiB, products up to 128 KiB; the default (100 KiB) is neither. */
const LIMITS: Record<string, { limitBytes: number }> = { users: { limitBytes: 256 * KIB }, products: { limitBytes: 128 * KIB } };

let directory: string;
let services: Record<string, RunningService>;
let gateway: RunningGateway;
const cases = await resourceCases();

/** A service as its entry in `servicesFile` makes it, as its own app makes it from services.json. */
const fromEntry = (definition: ServiceDefinition, name: string, servicesFile: string): ServiceDefinition => ({ ...definition, ...serviceDefaults(name, servicesFile) });

beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), 'service-body-limits-'));
  const declared = JSON.parse(await readFile(SERVICES_FILE, 'utf8')) as { services: { name: string }[] };
  const servicesFile = path.join(directory, 'services.json');
  await writeFile(servicesFile, JSON.stringify({ services: declared.services.map((entry) => ({ ...entry, body: LIMITS[entry.name] })) }));
  const start = (definition: ServiceDefinition) => startService(definition, (dependencies) => createServiceApp(definition, dependencies));
  const [users, products] = await Promise.all([start(fromEntry(usersService, 'users', servicesFile)), start(fromEntry(productsService, 'products', servicesFile))]);
  services = { users: users!, products: products! };
  gateway = await startGateway({ upstreams: { users: users!.url, products: products!.url }, servicesFile });
});
afterAll(async () => {
  await gateway?.close();
  await Promise.all(Object.values(services ?? {}).map((service) => service.close()));
  await rm(directory, { recursive: true, force: true });
});

/** Read and parsed by the service: only its schema refuses the unknown field. */
const TAKEN = { status: 400, detail: '1 field is invalid', errors: [{ path: 'padding', message: 'is not a known field' }] };
const REFUSED = { status: 413, detail: 'The request body is larger than 128kb' };

/** What each service answers a valid body padded to 150 KiB with a field it does not know, through `baseUrl(name)`. */
async function answersToLargeBodies(baseUrl: (name: string) => string) {
  const answers: Record<string, { status: number; detail: string; errors?: unknown }> = {};
  for (const { name, path: collection, valid } of cases) {
    const response = await client(baseUrl(name)).post(collection, { ...valid(1), padding: 'x'.repeat(150 * KIB) });
    const { detail, errors } = expectProblem(response, response.status) as { detail: string; errors?: unknown };
    answers[name] = { status: response.status, detail, errors };
  }
  return answers;
}

it("refuses a 150 KiB body at the gateway where the service's limit is 128 KiB, and passes it on where it is 256 KiB", async () => {
  expect(await answersToLargeBodies(() => gateway.url)).toEqual({ users: TAKEN, products: REFUSED });
});

it('applies the same limit at each service directly', async () => {
  expect(await answersToLargeBodies((name) => services[name]!.url)).toEqual({ users: TAKEN, products: REFUSED });
});
