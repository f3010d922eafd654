import { existsSync, readFileSync } from 'node:fs';
import { deployableDockerfile, deployables, effectiveConfig, instructionArgs, readDockerfile, repoPath } from './stack.js';

/**
 * One image per deployable: built in one stage, run from a small, non-root last stage. Every service
 * is built from the root Dockerfile (WORKSPACE names it), the gateway from its own.
 */

describe.each(deployables)('$name, from $dockerfile', ({ name, configSchema, migrates, dockerfile }) => {
  const stages = deployableDockerfile({ name, dockerfile });
  const runtime = stages.at(-1)!;
  const workdir = instructionArgs(runtime, 'WORKDIR').at(-1)!;

  test('every stage is node:24 (slim or alpine); the first builds with npm ci, the last holds no dev dependencies', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage.from).toMatch(/^node:24(\.[\d.]+)?-(slim|alpine)$/);
    const build = stages.find((stage) => stage.name === 'build')!;
    expect(instructionArgs(build, 'RUN')).toEqual(['npm ci', 'npx tsc -b']);
    const productionInstall = stages.flatMap((stage) => instructionArgs(stage, 'RUN')).filter((run) => run.includes('--omit=dev'));
    expect(productionInstall).toEqual([`npm ci --omit=dev --workspace ${name} && mkdir -p ${name}/node_modules`]);
    // npm nests a dependency whose version differs from the hoisted one under the workspace: both folders ship.
    expect(instructionArgs(runtime, 'COPY')).toEqual(
      expect.arrayContaining([`--from=production-dependencies /app/node_modules /app/node_modules`, `--from=production-dependencies /app/${name}/node_modules /app/${name}/node_modules`]),
    );
    expect(instructionArgs(runtime, 'RUN')).toEqual([]);
  });

  test('the last stage copies dist/, package.json and production node_modules (and migrations for a service)', () => {
    const copies = instructionArgs(runtime, 'COPY');
    expect(copies).toEqual(
      expect.arrayContaining([
        '--from=production-dependencies /app/node_modules /app/node_modules',
        '--from=build /app/services.json /app/',
        `--from=build /app/${name}/dist /app/${name}/dist`,
        `--from=build /app/${name}/package.json /app/${name}/`,
        '--from=build /app/shared/dist /app/shared/dist',
      ]),
    );
    const migrationCopies = copies.filter((copy) => copy.includes('migrations'));
    expect(migrationCopies).toEqual(migrates ? ['shared/migrations /app/shared/migrations', `${name}/migrations /app/${name}/migrations`] : []);
    if (migrates) expect(existsSync(repoPath(name, 'migrations'))).toBe(true);
  });

  test('runs as node with node as PID 1 on the built entry point, as `npm start` does, and exposes the port the config defaults to', () => {
    expect(instructionArgs(runtime, 'USER')).toEqual(['node']);
    const command = JSON.parse(instructionArgs(runtime, 'CMD').at(-1)!) as string[];
    // The same node options as the workspace's start script (the V8 heap sizing, docs/performance.md):
    // a young generation of 2 × 16 MiB in the gateway, 2 × 8 MiB in the services; the old
    // generation's growth bounded, allocation-site pretenuring off and the old generation held
    // well under the container's 256 MiB in the gateway only (docs/architecture.md, memory overload).
    const start = (JSON.parse(readFileSync(repoPath(name, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
    expect(`exec ${command.join(' ')}`).toBe(start);
    expect(command.at(-1)).toBe('dist/main.js');
    // The tracing preload (shared/src/telemetry/preload.ts) first: it must run before the entry point loads anything.
    const heap = name === 'gateway' ? ['--max-semi-space-size=16', '--heap-growing-percent=50', '--no-allocation-site-pretenuring', '--max-old-space-size=128'] : ['--max-semi-space-size=8'];
    expect(command.slice(1, -1)).toEqual(['--import', '@app/shared/telemetry/preload', ...heap]);
    // WORKDIR is /app/<workspace>, and `npm test` builds dist/ first: the entry point must exist.
    expect(workdir).toBe(`/app/${name}`);
    expect(existsSync(repoPath(name, command.at(-1)!))).toBe(true);
    // Every container listens on 8080: the image says so where the config's default is another port.
    const imagePort = instructionArgs(runtime, 'ENV').find((env) => env.startsWith('PORT='))?.slice('PORT='.length);
    const { PORT } = effectiveConfig(configSchema, imagePort === undefined ? {} : { PORT: imagePort });
    expect(PORT).toBe(8080);
    expect(instructionArgs(runtime, 'EXPOSE')).toEqual([String(PORT)]);
  });

  test('HEALTHCHECK runs node against /healthz on PORT, falling back to the default port', () => {
    const [healthcheck] = instructionArgs(runtime, 'HEALTHCHECK');
    const [, command = ''] = /^.*?CMD\s+(\[.*\])$/.exec(healthcheck ?? '') ?? [];
    const argv = JSON.parse(command) as string[];
    expect(argv.slice(0, 2)).toEqual(['node', '-e']);
    expect(argv[2]).toContain(`(process.env.PORT || 8080) + '/healthz'`);
  });

  test('the manifests and build stages are the same as the gateway\'s, so BuildKit builds them once, and name no workspace', () => {
    const sharedStages = (stages: ReturnType<typeof readDockerfile>) => stages.filter((stage) => stage.name === 'manifests' || stage.name === 'build');
    expect(sharedStages(readDockerfile(dockerfile))).toEqual(sharedStages(readDockerfile('gateway/Dockerfile')));
    expect(JSON.stringify(sharedStages(readDockerfile(dockerfile)))).not.toMatch(/users|products|gateway/);
  });
});

test('.dockerignore keeps node_modules, build output, tests, deployment files and secrets out of the context', () => {
  const ignored = readFileSync(repoPath('.dockerignore'), 'utf8').split('\n').filter((line) => line && !line.startsWith('#'));
  expect(ignored).toEqual(expect.arrayContaining(['**/node_modules', '**/dist', '**/test', '.git', '.env', 'compose', 'k8s', '**/deploy']));
});
