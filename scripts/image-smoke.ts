/**
 * `npm run image-smoke`: builds the images (the gateway's and one per service in services.json) from
 * their Dockerfiles, unchanged, with podman; runs them all read-only, as their non-root user, with
 * every capability dropped, against the host's MySQL (MariaDB) and Redis, two containers of each
 * service behind one gateway; and drives a smoke test through the containerised gateway: products
 * and users in depth, every service answering from both its containers. Prints build times, image
 * sizes and each check.
 *
 * Everything it makes is its own and goes away at the end: containers named `rms-smoke-<run>-*`, a
 * throwaway schema and MySQL user per service (made by compose/mysql-init's own script), image tags
 * `…:smoke-<run>` (the layers stay cached for the next build). Only loopback addresses are used:
 * - the services run in their own network namespaces (slirp4netns), reaching the host's MySQL at
 *   10.0.2.2, which slirp4netns maps to the host's 127.0.0.1; each publishes its port on a loopback
 *   address of the host: a service's two replicas on two addresses of a 127.x.y.0/24 of its own,
 *   the same port on both;
 * - the gateway runs in the host's network namespace, where a service's name (`products-service`)
 *   stands for both its replicas' addresses (as Compose's DNS would answer), and Redis is on 127.0.0.1.
 *
 * Needs root, podman, slirp4netns and a container runtime (Debian packages), and an image named
 * node:24-slim (the real one, or scripts/stand-in-node-image.sh where no registry is reachable).
 * The runtime and limits are those scripts/container-runtime.sh finds starting a container of that
 * image. MYSQL_ADMIN_URL (default mysql://root@127.0.0.1:3306) creates the throwaway users; where
 * it is unset and nothing lets root in there, or no Redis answers on 6379, the run brings its own
 * as npm start does (scripts/setup/local-servers.ts).
 */
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
// The sources, run as they are: the list needs no build.
import { readServiceList } from '../shared/src/platform/services.ts';
import { devPublicKey, signDevToken } from '../tools/dev-token.ts';
import { bringStartServers } from './setup/local-servers.ts';

const run = randomBytes(3).toString('hex');
const prefix = `rms-smoke-${run}`;
const services = readServiceList();
// Every service in services.json (from the root Dockerfile, WORKSPACE naming it) and the gateway.
const deployables = [...services.map(({ workspace }) => workspace), 'gateway'];
type Deployable = string;
const dockerfileArgs = (name: Deployable) => (name === 'gateway' ? ['-f', 'gateway/Dockerfile'] : ['-f', 'Dockerfile', '--build-arg', `WORKSPACE=${name}`]);
const tag = (name: Deployable) => `localhost/rest-microservices/${name}:smoke-${run}`;
let mysqlAdminUrl = new URL(process.env.MYSQL_ADMIN_URL ?? 'mysql://root@127.0.0.1:3306');
let redisUrl = 'redis://127.0.0.1:6379';
const BASE_IMAGE = 'docker.io/library/node:24-slim';
const HARDENED = ['--read-only', '--read-only-tmpfs=false', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges'];
const READY_WITHIN_MS = 120_000;

const execFileAsync = promisify(execFile);

/** The podman options (runtime, limits) that start a container here, as container-runtime.sh finds them. */
async function containerRuntime(): Promise<string[]> {
  const { stdout, stderr } = await execFileAsync(fileURLToPath(new URL('container-runtime.sh', import.meta.url)), [BASE_IMAGE]);
  process.stderr.write(stderr);
  console.log(`\n== podman ${stdout.trim()} (scripts/container-runtime.sh)`);
  return stdout.trim().split(/\s+/);
}

async function podman(...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync('podman', args, { maxBuffer: 64 * 1024 * 1024 });
  return stdout.trim();
}

const results: { name: string; ok: boolean; detail?: string }[] = [];
function check(name: string, ok: boolean, detail?: string): void {
  results.push({ name, ok, ...(detail === undefined ? {} : { detail }) });
  console.log(`${ok ? '  ok  ' : '  FAIL'} ${name}${detail === undefined ? '' : `: ${detail}`}`);
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** A port free on `address` now (another process may take it before we do; unlikely on loopback). */
function freePort(address = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, address, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function waitUntilReady(url: string, container: string): Promise<void> {
  const deadline = Date.now() + READY_WITHIN_MS;
  while (Date.now() < deadline) {
    const status = await fetch(url, { signal: AbortSignal.timeout(2_000) }).then((res) => res.status, () => 0);
    if (status === 200) return;
    const state = await podman('inspect', '--format', '{{.State.Status}}', container).catch(() => 'gone');
    if (state !== 'running') throw new Error(`${container} is ${state}:\n${await podman('logs', '--tail', '30', container).catch(() => '')}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`${url} (${container}) not ready within ${READY_WITHIN_MS} ms`);
}

// Throwaway schemas and users, made by the init script Compose and k8s dev use.

interface ServiceDatabase {
  schema: string;
  password: string;
}

function initScriptSql(service: string, password: string): string {
  const result = spawnSync(
    'bash',
    ['-c', 'docker_process_sql() { cat; }; source <(sed "/^create_service_user [a-z]/d" compose/mysql-init/create-service-users.sh); create_service_user "$SERVICE"'],
    { env: { PATH: process.env.PATH, SERVICE: service, [`${service.toUpperCase()}_DB_PASSWORD`]: password }, encoding: 'utf8' },
  );
  if (result.status !== 0) throw new Error(`the init script failed: ${result.stderr}`);
  return result.stdout;
}

async function withAdmin<T>(work: (connection: mysql.Connection) => Promise<T>): Promise<T> {
  const connection = await mysql.createConnection({ uri: mysqlAdminUrl.toString(), multipleStatements: true });
  try {
    return await work(connection);
  } finally {
    await connection.end();
  }
}

/** One throwaway schema and user per service, by its name. */
type Databases = Record<string, ServiceDatabase>;

async function createDatabases(): Promise<Databases> {
  const databases: Databases = Object.fromEntries(
    services.map(({ name }) => [name, { schema: `t_${run}_smoke_${name}`, password: `${randomBytes(9).toString('base64url')}'\\%` }]),
  );
  await withAdmin(async (connection) => {
    for (const { schema, password } of Object.values(databases)) await connection.query(initScriptSql(schema, password));
  });
  return databases;
}

async function dropDatabases(databases: ServiceDatabase[]): Promise<void> {
  await withAdmin(async (connection) => {
    for (const { schema } of databases) await connection.query(`DROP USER IF EXISTS '${schema}'@'%'; DROP DATABASE IF EXISTS \`${schema}\``);
  });
}

/** The service's DATABASE_URL inside its container: the host's MySQL as slirp4netns shows it. */
function databaseUrl({ schema, password }: ServiceDatabase): string {
  const url = new URL(`mysql://10.0.2.2:${mysqlAdminUrl.port || 3306}/${schema}`);
  url.username = schema;
  url.password = encodeURIComponent(password);
  return url.toString();
}

// Building.

async function buildImages(runtime: string[]): Promise<void> {
  console.log('\n== build (podman build --format docker, unchanged Dockerfiles)');
  const started = performance.now();
  for (const name of deployables) {
    const began = performance.now();
    await podman('build', ...runtime, '--format', 'docker', '--network', 'host', '--layers', ...dockerfileArgs(name), '-t', tag(name), '.');
    console.log(`  ${name.padEnd(17)} built in ${seconds(performance.now() - began)}`);
  }
  console.log(`  all ${deployables.length}              ${seconds(performance.now() - started)}`);
  console.log('\n== image sizes (as `podman images` shows them)');
  const size = (image: string) => podman('image', 'ls', '--format', '{{.Size}}', image);
  for (const name of deployables) console.log(`  ${name.padEnd(17)} ${await size(tag(name))}`);
  console.log(`  (node:24-slim      ${await size(BASE_IMAGE)}: the base each image adds to)`);
}

// Running.

/** A service's two containers: the same port on two loopback addresses, both behind its name. */
interface ServiceReplicas {
  name: string;
  workspace: string;
  port: number;
  replicas: { address: string; container: string }[];
}

interface Running {
  gatewayUrl: string;
  services: ServiceReplicas[];
  /** Every container, the gateway's last. */
  containers: string[];
}

/** Two loopback addresses of a 127.x.y.0/24 per service, and a port free on them. */
async function placeReplicas(): Promise<ServiceReplicas[]> {
  const x = 1 + (randomBytes(1)[0]! % 250);
  const placed: ServiceReplicas[] = [];
  for (const [index, { name, workspace }] of services.entries()) {
    const addresses = [2, 3].map((host) => `127.${x}.${1 + index}.${host}`);
    placed.push({
      name,
      workspace,
      port: await freePort(addresses[0]),
      replicas: addresses.map((address, replica) => ({ address, container: `${prefix}-${name}-${'ab'[replica]}` })),
    });
  }
  return placed;
}

async function startContainers(databases: Databases, runtime: string[]): Promise<Running> {
  console.log('\n== run (read-only, non-root, no capabilities)');
  const placed = await placeReplicas();
  const gatewayPort = await freePort();
  const gateway = `${prefix}-gateway`;
  const common = [...runtime, ...HARDENED, '--detach', '--label', `rms-smoke=${run}`, '--env', 'LOG_LEVEL=info'];
  // Each service image listens on 8080 (its ENV PORT), as in Compose and Kubernetes.
  for (const { name, workspace, port, replicas } of placed) {
    for (const { address, container } of replicas) {
      await podman('run', ...common, '--name', container, '--network', 'slirp4netns:allow_host_loopback=true', '--publish', `${address}:${port}:8080`,
        '--env', 'PORT=8080', '--env', `DATABASE_URL=${databaseUrl(databases[name]!)}`, tag(workspace));
    }
  }
  await podman('run', ...common, '--name', gateway, '--network', 'host',
    ...placed.flatMap(({ workspace, replicas }) => replicas.flatMap(({ address }) => ['--add-host', `${workspace}:${address}`])),
    '--env', `PORT=${gatewayPort}`,
    '--env', `GATEWAY_UPSTREAMS=${placed.map(({ name, workspace, port }) => `${name}=http://${workspace}:${port}`).join(',')}`,
    // A Redis database of its own, so no other gateway's list pages meet this one's.
    '--env', `REDIS_URL=${redisUrl}/${1 + (randomBytes(1)[0]! % 15)}`,
    // Authentication on, with the development key (as Compose runs it), which the gateway takes on
    // loopback only: on the host's network, it listens there and nowhere else.
    '--env', `AUTH_PUBLIC_KEY=${devPublicKey()}`,
    '--env', 'HOST=127.0.0.1',
    '--env', 'METRICS_HOST=127.0.0.1',
    tag('gateway'));
  const started = performance.now();
  await Promise.all([
    ...placed.flatMap(({ port, replicas }) => replicas.map(({ address, container }) => waitUntilReady(`http://${address}:${port}/readyz`, container))),
    waitUntilReady(`http://127.0.0.1:${gatewayPort}/readyz`, gateway),
  ]);
  const containers = [...placed.flatMap(({ replicas }) => replicas.map(({ container }) => container)), gateway];
  console.log(`  ${containers.length} containers ready in ${seconds(performance.now() - started)} (migrations included)`);
  return { gatewayUrl: `http://127.0.0.1:${gatewayPort}`, services: placed, containers };
}

async function checkContainers({ containers }: Running): Promise<void> {
  console.log('\n== containers');
  for (const container of containers) {
    const [user, readOnly, caps] = (await podman('inspect', '--format', '{{.Config.User}}|{{.HostConfig.ReadonlyRootfs}}|{{.EffectiveCaps}}', container)).split('|');
    const uid = await podman('exec', container, 'id', '-u');
    const write = await podman('exec', container, 'node', '-e', "try { require('fs').writeFileSync('/app/probe', 'x'); console.log('written') } catch (e) { console.log(e.code) }");
    const health = await podman('healthcheck', 'run', container).then(() => 'healthy', (error: Error) => `unhealthy: ${error.message}`);
    check(`${container}: user ${user} (uid ${uid}), read-only ${readOnly}, capabilities ${caps}, writing /app: ${write}, HEALTHCHECK: ${health}`,
      uid !== '0' && readOnly === 'true' && caps === '[]' && write === 'EROFS' && health === 'healthy');
  }
}

// The smoke test, through the gateway.

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

type Call = (method: string, path: string, options?: { json?: unknown; headers?: Record<string, string>; body?: string }) => Promise<Answer>;

/** Requests to the gateway with a token for every service, signed with the development key (as `npm run token` makes). */
async function gatewayCaller(gatewayUrl: string): Promise<Call> {
  const token = await signDevToken({ scopes: services.flatMap(({ scopes }) => [scopes.read, scopes.write]), subject: 'image-smoke', ttlSeconds: 3_600 });
  return async (method, path, options = {}) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, ...options.headers };
    let body = options.body;
    if (options.json !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = JSON.stringify(options.json);
    }
    const res = await fetch(gatewayUrl + path, { method, headers, ...(body === undefined ? {} : { body }), signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    const isJson = /json/.test(res.headers.get('content-type') ?? '');
    return { status: res.status, headers: res.headers, body: isJson && text ? JSON.parse(text) : text };
  };
}

const shown = (answer: Answer) => `${answer.status} ${answer.headers.get('x-cache') ?? ''} ${JSON.stringify(answer.body).slice(0, 120)}`;

async function smoke(call: Call): Promise<void> {
  console.log('\n== smoke, through the containerised gateway');
  const problem = (answer: Answer, status: number, type: string) =>
    answer.status === status &&
    answer.headers.get('content-type')?.startsWith('application/problem+json') === true &&
    (answer.body as { type?: string }).type === `https://problems.example/${type}`;
  const sku = `SMOKE-${run}`;
  const created = await call('POST', '/api/products', { json: { sku, name: 'Smoke', price: { amount: '19.9', currency: 'EUR' }, stock: 3 } });
  const product = created.body as { id: string; price: { amount: string } };
  check('POST /api/products: 201, Location, ETag "1", the price as stored', created.status === 201 && created.headers.get('location') === `/api/products/${product.id}` && created.headers.get('etag') === '"1"' && product.price?.amount === '19.90', shown(created));
  const item = `/api/products/${product.id}`;

  const first = await call('GET', item);
  const second = await call('GET', item);
  check('GET: 200, then the same answer from the cache (X-Cache MISS, then HIT with Age)', first.status === 200 && first.headers.get('x-cache') === 'MISS' && second.status === 200 && second.headers.get('x-cache') === 'HIT' && second.headers.get('age') !== null && JSON.stringify(first.body) === JSON.stringify(second.body), `${shown(first)} / ${shown(second)}`);
  const notModified = await call('GET', item, { headers: { 'if-none-match': '"1"' } });
  check('GET with If-None-Match "1": 304 from the cache', notModified.status === 304 && notModified.headers.get('x-cache') === 'HIT', shown(notModified));

  const patched = await call('PATCH', item, { json: { price: { amount: '17.50' } }, headers: { 'content-type': 'application/merge-patch+json', 'if-match': '"1"' } });
  check('PATCH (merge patch, If-Match "1"): 200, ETag "2"', patched.status === 200 && patched.headers.get('etag') === '"2"' && (patched.body as typeof product).price.amount === '17.50', shown(patched));
  const afterWrite = await call('GET', item);
  check('GET after the write: the new version, never the cached old one', afterWrite.status === 200 && afterWrite.headers.get('etag') === '"2"' && (afterWrite.body as typeof product).price.amount === '17.50', shown(afterWrite));
  const replaced = await call('PUT', item, { json: { sku, name: 'Smoke II', price: { amount: '1.00', currency: 'USD' } } });
  check('PUT: 200, ETag "3", stock back to its default', replaced.status === 200 && replaced.headers.get('etag') === '"3"' && (replaced.body as { stock: number }).stock === 0, shown(replaced));

  const stale = await call('DELETE', item, { headers: { 'if-match': '"1"' } });
  check('DELETE with a stale If-Match: 412 problem', problem(stale, 412, 'precondition-failed'), shown(stale));
  const invalid = await call('POST', '/api/products', { json: { sku: 'bad sku!', name: '', price: { amount: 1, currency: 'EURO' }, colour: 'red' } });
  check('POST an invalid product: 400 problem listing each field', problem(invalid, 400, 'validation') && (invalid.body as { errors: unknown[] }).errors.length >= 4, shown(invalid));
  const duplicate = await call('POST', '/api/products', { json: { sku, name: 'Again', price: { amount: '1', currency: 'EUR' } } });
  check('POST a taken sku: 409 problem', problem(duplicate, 409, 'conflict'), shown(duplicate));
  const malformed = await call('POST', '/api/products', { body: '{"sku":', headers: { 'content-type': 'application/json' } });
  check('POST malformed JSON: 400 problem', problem(malformed, 400, 'malformed-json'), shown(malformed));
  const mediaType = await call('POST', '/api/products', { body: 'sku=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  check('POST a form: 415 problem', problem(mediaType, 415, 'unsupported-media-type'), shown(mediaType));
  const method = await call('DELETE', '/api/products');
  check('DELETE the collection: 405 problem with Allow', problem(method, 405, 'method-not-allowed') && method.headers.get('allow') === 'GET, HEAD, POST', shown(method));
  const route = await call('GET', '/nowhere');
  check('GET an unknown route: 404 problem from the gateway', problem(route, 404, 'not-found'), shown(route));

  const deleted = await call('DELETE', item);
  const gone = await call('GET', item);
  check('DELETE: 204, then GET is a 404 problem', deleted.status === 204 && problem(gone, 404, 'not-found'), `${deleted.status} / ${shown(gone)}`);

  const email = `smoke-${run}@example.com`;
  const user = await call('POST', '/api/users', { json: { email, name: '  Ada  ' } });
  const userId = (user.body as { id: string }).id;
  const found = await call('GET', `/api/users?email=${encodeURIComponent(email.toUpperCase())}`);
  const removed = await call('DELETE', `/api/users/${userId}`);
  check('users: create (name trimmed), find by email ignoring case, delete', user.status === 201 && (user.body as { name: string }).name === 'Ada' && (found.body as { items: { id: string }[] }).items[0]?.id === userId && removed.status === 204, `${shown(user)} / ${shown(found)} / ${removed.status}`);

}

/** Every service answers through the gateway, from both its containers: concurrent misses open several connections, each to the next replica. */
async function checkEveryServiceAnswers(call: Call, running: Running): Promise<void> {
  console.log('\n== every service, from both its containers');
  for (const { name, workspace, replicas } of running.services) {
    const requestIds = Array.from({ length: 24 }, (_, index) => `${prefix}-${name}-spread-${index}`);
    const answers = await Promise.all(requestIds.map((id, index) => call('GET', `/api/${name}?limit=${index + 1}`, { headers: { 'x-request-id': id } })));
    const served = await Promise.all(replicas.map(async ({ container }) => {
      const logs = await podman('logs', container);
      return requestIds.filter((id) => logs.includes(`"requestId":"${id}"`)).length;
    }));
    const listed = answers.every((answer) => answer.status === 200 && Array.isArray((answer.body as { items?: unknown }).items));
    check(`GET /api/${name}: 200 with its items, served by the two ${workspace} containers ${served.join(' + ')} of ${requestIds.length}`,
      listed && served.every((count) => count > 0) && served.reduce((sum, count) => sum + count, 0) === requestIds.length,
      listed ? undefined : shown(answers.find((answer) => answer.status !== 200) ?? answers[0]!));
  }
}

async function cleanUp(databases: ServiceDatabase[]): Promise<void> {
  const containers = (await podman('ps', '--all', '--filter', `label=rms-smoke=${run}`, '--format', '{{.Names}}').catch(() => '')).split('\n').filter(Boolean);
  for (const container of containers) await podman('rm', '--force', '--time', '5', container).catch(() => undefined);
  for (const name of deployables) await podman('rmi', tag(name)).catch(() => undefined);
  if (databases.length > 0) await dropDatabases(databases);
}

async function main(): Promise<number> {
  const started = performance.now();
  // A MYSQL_ADMIN_URL stands for the configured MySQL, as DATABASE_URL does for npm start.
  const env = process.env.MYSQL_ADMIN_URL ? { ...process.env, DATABASE_URL: process.env.MYSQL_ADMIN_URL } : process.env;
  const servers = await bringStartServers(env, (line) => console.log(`image smoke: ${line}`));
  mysqlAdminUrl = new URL(servers.mysqlUrl ?? mysqlAdminUrl);
  redisUrl = servers.redisUrl ?? redisUrl;
  let databases: Databases | undefined;
  try {
    const runtime = await containerRuntime();
    await buildImages(runtime);
    databases = await createDatabases();
    const running = await startContainers(databases, runtime);
    await checkContainers(running);
    const call = await gatewayCaller(running.gatewayUrl);
    await smoke(call);
    await checkEveryServiceAnswers(call, running);
  } catch (error) {
    check('the smoke run', false, (error as Error).message);
  } finally {
    await cleanUp(databases ? Object.values(databases) : []);
    await servers.stop();
  }
  const failed = results.filter((result) => !result.ok).length;
  console.log(`\nimage smoke took ${seconds(performance.now() - started)} in all`);
  console.log(`image smoke: ${results.length - failed} checks passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main();
