/**
 * `npm run new-service -- orders --owner writes`, as a new user runs it, in a copy of the
 * repository: it touches at most 5 files outside orders-service/ (none of the gateway's code), the
 * copy builds, Kubernetes (prod and dev) and Compose deploy orders-service, and the gateway serves
 * /api/orders with its token scopes and its cache; every reader reads an order, only its owner
 * changes it. The copy shares this checkout's installed packages, so it takes
 * seconds to make; the run is bounded (3 minutes).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { dropSchema, throwawayDatabaseUrl } from '../support/stack.js';
import { ROOT, run, type RunningProcess } from '../../tools/process.js';
import { renderKustomization } from '../deploy/kustomize.js';

const SCAFFOLD_MS = 180_000;
// orders, unless the repository has one already (it may: a scaffolded service is one like any other).
const listed = (JSON.parse(readFileSync(path.join(ROOT, 'services.json'), 'utf8')) as { services: { name: string }[] }).services.map(({ name }) => name);
const NAME = ['orders', 'invoices', 'shipments'].find((name) => !listed.includes(name))!;
const WORKSPACE = `${NAME}-service`;
let copy: string;
const processes: RunningProcess[] = [];
const databaseUrls: string[] = [];

const inCopy = (command: string, args: string[]) => execFileSync(command, args, { cwd: copy, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** A copy of the repository's files (tracked, and untracked but not ignored), with this checkout's node_modules linked in. */
function copyRepository(): string {
  const target = mkdtempSync(path.join(tmpdir(), 'new-service-'));
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  for (const file of files) {
    // A file deleted in the work tree but not yet in the index is listed too.
    if (!lstatSync(path.join(ROOT, file), { throwIfNoEntry: false })) continue;
    mkdirSync(path.dirname(path.join(target, file)), { recursive: true });
    cpSync(path.join(ROOT, file), path.join(target, file));
  }
  // Every installed package, but the workspaces' own links, which must lead into the copy.
  mkdirSync(path.join(target, 'node_modules', '@app'), { recursive: true });
  for (const entry of readdirSync(path.join(ROOT, 'node_modules'))) {
    if (entry === '@app' || lstatSync(path.join(ROOT, 'node_modules', entry)).isSymbolicLink()) continue;
    symlinkSync(path.join(ROOT, 'node_modules', entry), path.join(target, 'node_modules', entry));
  }
  symlinkSync('../../shared', path.join(target, 'node_modules', '@app', 'shared'));
  for (const workspace of readdirSync(ROOT, { withFileTypes: true }).filter((entry) => entry.isDirectory() && entry.name !== 'node_modules')) {
    const own = path.join(ROOT, workspace.name, 'node_modules');
    if (lstatSync(own, { throwIfNoEntry: false })?.isDirectory()) symlinkSync(own, path.join(target, workspace.name, 'node_modules'));
  }
  execFileSync('git', ['init', '-q'], { cwd: target });
  execFileSync('git', ['add', '-A'], { cwd: target });
  execFileSync('git', ['-c', 'user.name=test', '-c', 'user.email=test@example.com', 'commit', '-qm', 'copy'], { cwd: target });
  return target;
}

beforeAll(() => {
  copy = copyRepository();
  inCopy(process.execPath, ['scripts/new-service.ts', NAME, '--owner', 'writes']);
}, SCAFFOLD_MS);

afterAll(async () => {
  for (const started of processes) started.child.kill('SIGTERM');
  await Promise.all(processes.map((started) => started.exited));
  await Promise.all(databaseUrls.map(dropSchema));
  if (copy) rmSync(copy, { recursive: true, force: true });
});

test(`touches at most 5 files outside ${WORKSPACE}/, none under gateway/src`, () => {
  const changed = inCopy('git', ['status', '--porcelain', '--untracked-files=all'])
    .split('\n')
    .filter(Boolean)
    .map((line) => line.slice(3))
    .filter((file) => !file.startsWith(`${WORKSPACE}/`));
  expect(changed.length).toBeLessThanOrEqual(5);
  expect(changed.filter((file) => file.startsWith('gateway/src'))).toEqual([]);
  expect(changed).toContain('services.json');
});

test('its first migration points to the expand-then-contract recipe for every later schema change', () => {
  const [first] = readdirSync(path.join(copy, WORKSPACE, 'migrations'));
  const sql = readFileSync(path.join(copy, WORKSPACE, 'migrations', first!), 'utf8');
  const recipe = /docs\/deploy\.md, "([^"]+)"/.exec(sql)?.[1];
  expect(recipe).toBeDefined();
  expect(readFileSync(path.join(copy, 'docs', 'deploy.md'), 'utf8').split('\n')).toContain(`### ${recipe!}: expand, then contract`);
});

test('writes at most 40 lines of Kubernetes YAML: only what sets the service apart', () => {
  // Lines added to files the repository had, and every line of the files the scaffold made.
  const added = inCopy('git', ['diff', '--numstat', 'HEAD', '--', '*.yaml', '*.yml']);
  const untracked = inCopy('git', ['ls-files', '--others', '--exclude-standard', '--', '*.yaml', '*.yml']).split('\n').filter(Boolean);
  const kubernetes = (file: string) => file.startsWith('k8s/') || file.startsWith(`${WORKSPACE}/deploy/k8s/`);
  const changedLines = added
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('\t'))
    .filter(([, , file]) => kubernetes(file!))
    .reduce((sum, [plus]) => sum + Number(plus), 0);
  const newLines = untracked.filter(kubernetes).reduce((sum, file) => sum + readFileSync(path.join(copy, file), 'utf8').trimEnd().split('\n').length, 0);
  expect(newLines).toBeGreaterThan(0);
  expect(changedLines + newLines).toBeLessThanOrEqual(40);
});

test(`Kubernetes deploys ${WORKSPACE}: prod renders its Deployment and Service, dev its credentials too`, () => {
  const prod = renderKustomization(path.join(copy, 'k8s', 'overlays', 'prod'));
  expect(prod.filter(({ metadata }) => metadata.name === WORKSPACE).map(({ kind }) => kind)).toEqual(
    expect.arrayContaining(['Deployment', 'Service', 'ConfigMap', 'HorizontalPodAutoscaler']),
  );
  const dev = renderKustomization(path.join(copy, 'k8s', 'overlays', 'dev'));
  expect(dev.some(({ kind, metadata }) => kind === 'Secret' && metadata.name === `${WORKSPACE}-database`)).toBe(true);
});

test(`Compose runs ${WORKSPACE} from the root Dockerfile, and the gateway and MySQL know of it`, () => {
  const file = parse(readFileSync(path.join(copy, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, { build?: unknown; env_file?: string[]; depends_on?: Record<string, unknown>; healthcheck?: unknown }>;
  };
  expect(file.services[WORKSPACE]).toMatchObject({ build: { context: '.', args: { WORKSPACE } }, env_file: [`${WORKSPACE}/deploy/compose.env`] });
  expect(file.services[WORKSPACE]!.healthcheck).toBeDefined();
  expect(Object.keys(file.services.gateway!.depends_on!)).toContain(WORKSPACE);
  expect(file.services.mysql!.env_file).toContain(`${WORKSPACE}/deploy/mysql.env`);
});

test(
  `builds, and the gateway serves /api/${NAME}: 401 without a token, 201 with ${NAME}:write and the example, the second read a cache HIT`,
  async () => {
    inCopy(path.join(copy, 'node_modules', '.bin', 'tsc'), ['-b']);
    // Every service the copy's list has, the new one among them, each on a throwaway schema.
    const { services } = JSON.parse(readFileSync(path.join(copy, 'services.json'), 'utf8')) as { services: { name: string }[] };
    const upstreams = await Promise.all(
      services.map(async ({ name }) => {
        const databaseUrl = throwawayDatabaseUrl(name);
        databaseUrls.push(databaseUrl);
        const service = run(process.execPath, [`${name}-service/dist/main.js`], { PORT: '0', DATABASE_URL: databaseUrl }, copy);
        processes.push(service);
        return `${name}=http://127.0.0.1:${String((await service.logged((line) => String(line.msg).endsWith('listening'))).port)}`;
      }),
    );
    const keys = readFileSync(path.join(copy, 'dev-keys', 'public-key.jwk'), 'utf8');
    const gateway = run(
      process.execPath,
      ['gateway/dist/main.js'],
      { PORT: '0', GATEWAY_UPSTREAMS: upstreams.join(','), AUTH_PUBLIC_KEY: keys, REDIS_URL: process.env.TEST_REDIS_URL!, REDIS_KEY_PREFIX: `scaffold-${randomBytes(4).toString('hex')}:` },
      copy,
    );
    processes.push(gateway);
    const base = `http://127.0.0.1:${String((await gateway.logged((line) => String(line.msg).endsWith('listening'))).port)}`;
    const token = inCopy(process.execPath, ['scripts/token.ts', '--scope', `${NAME}:read,${NAME}:write`]).trim();
    const document = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, { post: { requestBody: { content: Record<string, { example: unknown }> } } }> };
    const example = JSON.stringify(Object.values(document.paths[`/api/${NAME}`]!.post.requestBody.content)[0]!.example);
    const post = (headers: Record<string, string>) => fetch(`${base}/api/${NAME}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: example });

    expect((await post({})).status).toBe(401);
    const created = await post({ authorization: `Bearer ${token}` });
    expect(created.status).toBe(201);
    const read = () => fetch(`${base}${created.headers.get('location')!}`, { headers: { authorization: `Bearer ${token}` } });
    const [first, second] = [await read(), await read()];
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(second.headers.get('x-cache')).toBe('HIT');
    expect(await second.json()).toMatchObject(JSON.parse(example) as object);

    // Declared "owner": "writes": another caller reads it, and may not change or delete it (403).
    const other = inCopy(process.execPath, ['scripts/token.ts', '--scope', `${NAME}:read,${NAME}:write`, '--sub', 'someone-else']).trim();
    const asOther = (method: string, body?: string) =>
      fetch(`${base}${created.headers.get('location')!}`, { method, headers: { authorization: `Bearer ${other}`, 'content-type': 'application/merge-patch+json' }, body });
    expect((await asOther('GET')).status).toBe(200);
    for (const refused of [await asOther('PATCH', '{}'), await asOther('DELETE')]) {
      expect(refused.status).toBe(403);
      expect(await refused.json()).toMatchObject({ type: 'https://problems.example/not-owner' });
    }
    expect((await read()).status).toBe(200);
  },
  SCAFFOLD_MS,
);
