import { readFileSync } from 'node:fs';
import type { RequestListener } from 'node:http';
import { DEV_AUDIENCE, DEV_ISSUER, DEV_PUBLIC_KEY_JWK } from '@app/shared/platform/dev-auth';
import { Lifecycle } from '@app/shared/platform/http/lifecycle';
import { createLogger } from '@app/shared/platform/logger';
import { Database, DEFAULT_WRITE_DEADLINE_MS } from '@app/shared/platform/mysql';
import { listen } from '@app/shared/platform/server';
import type { IDeployment } from 'kubernetes-models/apps/v1';
import type { IService } from 'kubernetes-models/v1';
import { createGateway } from '../../gateway/dist/gateway.js';
import { devKeyProblems, isLoopback } from '../../gateway/dist/auth/config.js';
import { configSchema as gatewayConfig } from '../../gateway/dist/config.js';
import { upstreamSettings } from '../../gateway/dist/routing/upstreams.js';
import { serviceModules } from '../../tools/services.js';
import { imageName, type KubernetesObject, renderKustomization } from './kustomize.js';
import {
  compose,
  composeEnvironment,
  containerEnvironment,
  type Deployable,
  deployables,
  effectiveConfig,
  findObject,
  instructionArgs,
  knownValues,
  mainContainer,
  objectsOfKind,
  type Overlay,
  overlays,
  deployableDockerfile,
  readEnvFile,
  renderOverlay,
  repoPath,
  services,
  variablesRead,
  variablesRequired,
} from './stack.js';

/**
 * Drift between the deployment files and the code: every variable set is one the config schema
 * reads, every variable it requires is set, ports and probe paths are the ones the processes serve,
 * image names are the ones the Dockerfiles build, and Compose and k8s dev hold the same credentials.
 */

const composeFile = compose();
const serviceApps = await serviceModules();
const rendered = Object.fromEntries(overlays.map((overlay) => [overlay, renderOverlay(overlay)])) as Record<Overlay, KubernetesObject[]>;
const k8sEnvironment = (overlay: Overlay, name: string) =>
  containerEnvironment(mainContainer(findObject(rendered[overlay], 'Deployment', name)), rendered[overlay]);

describe.each(deployables)('$name environment', ({ name, configSchema }) => {
  const read = variablesRead(configSchema);
  const sources: [string, Record<string, string | undefined>][] = [
    ['docker-compose.yml', composeEnvironment(composeFile.services[name]!)],
    ...overlays.map((overlay): [string, Record<string, string | undefined>] => [`k8s ${overlay}`, k8sEnvironment(overlay, name).values]),
  ];

  test.each(sources)('%s sets only variables the config schema reads', (_source, environment) => {
    expect(Object.keys(environment).filter((variable) => !read.includes(variable))).toEqual([]);
  });

  test.each(sources)('%s sets every variable the config schema requires', (_source, environment) => {
    expect(variablesRequired(configSchema).filter((variable) => !(variable in environment))).toEqual([]);
  });

  test.each(sources)('%s values pass the config schema', (_source, environment) => {
    const known = Object.fromEntries(Object.entries(environment).filter((entry): entry is [string, string] => entry[1] !== undefined));
    expect(() => effectiveConfig(configSchema, known)).not.toThrow();
  });
});

/** Every variable's effective value (set or default) for `name` in each deployment. */
function effectiveEverywhere(name: Deployable['name']): [string, Record<string, unknown>][] {
  const { configSchema } = deployables.find((deployable) => deployable.name === name)!;
  const known = (environment: Record<string, string | undefined>) =>
    effectiveConfig(configSchema, Object.fromEntries(Object.entries(environment).filter((entry): entry is [string, string] => entry[1] !== undefined)));
  return [
    ['docker-compose.yml', known(composeEnvironment(composeFile.services[name]!))],
    ...overlays.map((overlay): [string, Record<string, unknown>] => [`k8s ${overlay}`, known(k8sEnvironment(overlay, name).values)]),
  ];
}

test('the gateway waits out a write at least as long as the services may still commit it', () => {
  const gateway = Object.fromEntries(effectiveEverywhere('gateway'));
  for (const { workspace: service } of services) {
    for (const [source, config] of effectiveEverywhere(service)) {
      expect({ source, service, gatewayKnowsAtLeast: (gateway[source]!.SERVICE_WRITE_DEADLINE_MS as number) >= (config.WRITE_DEADLINE_MS as number) }).toEqual({
        source,
        service,
        gatewayKnowsAtLeast: true,
      });
    }
  }
  expect(gatewayConfig.parse({}).SERVICE_WRITE_DEADLINE_MS).toBeGreaterThan(DEFAULT_WRITE_DEADLINE_MS);
});

test('variablesRequired finds a variable without a default, so the checks above are not vacuous', () => {
  expect(variablesRequired(gatewayConfig.required({ REDIS_URL: true }))).toEqual(['REDIS_URL']);
});

describe.each(deployables)('$name ports', ({ name, configSchema, dockerfile }) => {
  const composePort = effectiveConfig(configSchema, composeEnvironment(composeFile.services[name]!)).PORT;
  const [exposed] = instructionArgs(deployableDockerfile({ name, dockerfile }).at(-1)!, 'EXPOSE');

  test('the port the process listens on under Compose is the one the image exposes', () => {
    expect(String(composePort)).toBe(exposed);
  });

  test.each(overlays)('k8s %s: the container ports are the ports the process listens on', (overlay) => {
    const container = mainContainer(findObject(rendered[overlay], 'Deployment', name));
    const { PORT, METRICS_PORT } = effectiveConfig(configSchema, knownValues(k8sEnvironment(overlay, name)));
    expect(container.ports!.map((port) => port.containerPort)).toEqual(METRICS_PORT === undefined ? [PORT] : [PORT, METRICS_PORT]);
  });
});

test('the gateway is published on the port it listens on', () => {
  const { PORT } = effectiveConfig(gatewayConfig, composeEnvironment(composeFile.services.gateway!));
  expect(composeFile.services.gateway!.ports).toEqual([`${'${GATEWAY_BIND_ADDRESS:-127.0.0.1}'}:8080:${PORT}`]);
});

/** The host and port a URL names, defaulting the port by scheme. */
function hostAndPort(url: string): [string, number] {
  const { hostname, port, protocol } = new URL(url);
  const defaults: Record<string, number> = { 'http:': 80, 'https:': 443, 'mysql:': 3306, 'redis:': 6379 };
  return [hostname, port ? Number(port) : defaults[protocol]!];
}

/** The URL the gateway proxies `service` to, from the gateway's environment. */
const upstreamUrl = (service: string) => (environment: Record<string, string | undefined>) => {
  const { upstreams } = upstreamSettings(effectiveConfig(gatewayConfig, environment as Record<string, string>) as Parameters<typeof upstreamSettings>[0]);
  return upstreams.find(({ name }) => name === service)!.url;
};
const variable = (name: string) => (environment: Record<string, string | undefined>) => environment[name]!;

/** What each URL must reach: a deployable or a datastore, by Compose service and k8s workload. */
const urlTargets: { deployable: string; variable: string; url: (environment: Record<string, string | undefined>) => string; target: string; kind: 'Deployment' | 'StatefulSet' }[] = [
  ...services.map(({ name, workspace }) => ({ deployable: 'gateway', variable: `the ${name} upstream`, url: upstreamUrl(name), target: workspace, kind: 'Deployment' as const })),
  { deployable: 'gateway', variable: 'REDIS_URL', url: variable('REDIS_URL'), target: 'redis', kind: 'StatefulSet' },
  ...services.map(({ workspace }) => ({ deployable: workspace, variable: 'DATABASE_URL', url: variable('DATABASE_URL'), target: 'mysql', kind: 'StatefulSet' as const })),
];

describe.each(urlTargets)('$deployable $variable', ({ deployable, url, target, kind }) => {
  test(`reaches ${target} under Compose, on the port it listens on`, () => {
    const [host, port] = hostAndPort(url(composeEnvironment(composeFile.services[deployable]!)));
    expect(host).toBe(target);
    const targetDeployable = deployables.find((candidate) => candidate.name === target);
    const listening = targetDeployable
      ? effectiveConfig(targetDeployable.configSchema, composeEnvironment(composeFile.services[target]!)).PORT
      : { mysql: 3306, redis: 6379 }[target];
    expect(port).toBe(listening);
  });

  test(`reaches the ${target} pods in k8s dev, through a Service whose port leads to theirs`, () => {
    const objects = rendered.dev;
    const [host, port] = hostAndPort(url(k8sEnvironment('dev', deployable).values));
    const service = findObject<IService>(objects, 'Service', host);
    const workload = findObject<KubernetesObject & IDeployment>(objects, kind, target);
    expect(workload.spec!.template.metadata!.labels).toMatchObject(service.spec!.selector!);
    const servicePort = service.spec!.ports!.find((candidate) => candidate.port === port);
    const containerPort = mainContainer(workload).ports!.find((candidate) => candidate.name === servicePort?.targetPort);
    expect(containerPort?.containerPort).toBe(port);
  });
});

describe('probe paths', () => {
  const db = new Database(process.env.TEST_MYSQL_URL!);
  const logger = createLogger('deploy-test', 'silent');
  afterAll(() => db.close());

  const createApp: Record<Deployable['name'], (lifecycle: Lifecycle) => RequestListener> = {
    ...Object.fromEntries(serviceApps.map(({ entry, createApp }) => [entry.workspace, (lifecycle: Lifecycle) => createApp({ db, logger, lifecycle })])),
    gateway: (lifecycle) =>
      createGateway(
        gatewayConfig.parse({
          AUTH_ENABLED: 'false',
          CACHE_ENABLED: 'false',
          RATE_LIMIT_ENABLED: 'false',
          UPSTREAM_TIMEOUT_MS: '1000',
          REQUEST_BODY_TIMEOUT_MS: '1000',
          SERVICE_WRITE_DEADLINE_MS: '1000',
          UPSTREAM_CONCURRENCY_LIMIT: '8',
        }),
        { logger, lifecycle },
      ).handler,
  };

  const quotedPaths = (text: string) => [...text.matchAll(/'(\/[a-z]+)'/g)].map(([, path]) => path!);

  /** Every HTTP path a healthcheck or probe of the deployable asks for, by kind of check. */
  function probePaths(name: Deployable['name']) {
    const dockerfileCheck = instructionArgs(deployableDockerfile(deployables.find((deployable) => deployable.name === name)!).at(-1)!, 'HEALTHCHECK').join(' ');
    const composeCheck = composeFile.services[name]!.healthcheck!.test.join(' ');
    const containers = overlays.map((overlay) => mainContainer(findObject(rendered[overlay], 'Deployment', name)));
    return {
      liveness: [
        ...quotedPaths(dockerfileCheck),
        ...quotedPaths(composeCheck),
        ...containers.flatMap((container) => [container.livenessProbe?.httpGet?.path, container.startupProbe?.httpGet?.path]),
      ].filter((path): path is string => path !== undefined),
      readiness: containers.map((container) => container.readinessProbe!.httpGet!.path!),
    };
  }

  test.each(deployables)('$name serves every probe path with 200; readiness alone turns 503 on shutdown', async ({ name }) => {
    const { liveness, readiness } = probePaths(name);
    expect(liveness.length).toBeGreaterThanOrEqual(4);
    const lifecycle = new Lifecycle();
    const running = await listen(createApp[name]!(lifecycle), 0, '127.0.0.1');
    const status = async (path: string) => (await fetch(`http://127.0.0.1:${running.port}${path}`)).status;
    try {
      for (const path of [...liveness, ...readiness]) expect([path, await status(path)]).toEqual([path, 200]);
      lifecycle.beginShutdown();
      for (const path of readiness) expect([path, await status(path)]).toEqual([path, 503]);
      for (const path of liveness) expect([path, await status(path)]).toEqual([path, 200]);
    } finally {
      await running.close(1_000);
    }
  });
});

describe.each(deployables)('$name image', ({ name, dockerfile }) => {
  const composeImage = composeFile.services[name]!.image!;
  const [composeName, composeTag] = [imageName(composeImage), composeImage.slice(imageName(composeImage).length + 1)];

  test('Compose builds it from its Dockerfile under the name the k8s base runs (there from a registry)', () => {
    expect(composeFile.services[name]!.build!.dockerfile ?? 'Dockerfile').toBe(dockerfile);
    const base = renderKustomization(repoPath('k8s', 'base'));
    expect(imageName(mainContainer(findObject(base, 'Deployment', name)).image!)).toMatch(new RegExp(`(^|/)${composeName}$`));
  });

  test('k8s dev runs the very image Compose builds, so `kind load` of it is all a dev cluster needs', () => {
    expect(mainContainer(findObject(rendered.dev, 'Deployment', name)).image).toBe(`${composeName}:${composeTag}`);
  });

  test('k8s prod runs the same image from a registry', () => {
    expect(mainContainer(findObject(rendered.prod, 'Deployment', name)).image).toMatch(new RegExp(`^[a-z0-9.-]+/${composeName}:[\\w.-]+$`));
  });
});

test('Compose and k8s dev hold the same local credentials', () => {
  const secretData = (secretName: string) => findObject<{ stringData: Record<string, string> }>(rendered.dev, 'Secret', secretName).stringData;
  expect(secretData('mysql')).toEqual(composeEnvironment(composeFile.services.mysql!));
  for (const { workspace } of services) expect(secretData(`${workspace}-database`)).toEqual(readEnvFile(`${workspace}/deploy/compose.env`));
  expect(secretData('gateway-redis')).toEqual(readEnvFile('compose/gateway.env'));
  expect(secretData('gateway-auth')).toEqual(readEnvFile('compose/gateway-auth.env'));
  // The development key's public half, which `npm start` uses and `npm run token` signs for.
  expect(JSON.parse(secretData('gateway-auth').AUTH_PUBLIC_KEY!)).toEqual(JSON.parse(readFileSync(repoPath('dev-keys', 'public-key.jwk'), 'utf8')));
  // And the one the gateway knows, to refuse it where other machines reach it.
  expect(JSON.parse(readFileSync(repoPath('dev-keys', 'public-key.jwk'), 'utf8'))).toMatchObject(DEV_PUBLIC_KEY_JWK);
});

/** What the gateway's image sets (ENV in its last stage): a deployment's own variables go over it. */
const gatewayImageEnvironment = Object.fromEntries(
  instructionArgs(deployableDockerfile(deployables.find(({ name }) => name === 'gateway')!).at(-1)!, 'ENV').map((env) => [env.slice(0, env.indexOf('=')), env.slice(env.indexOf('=') + 1)]),
);

test('the gateway starts in every deployment (the development key only where AUTH_ALLOW_DEV_KEY says so), and Prometheus reaches its metrics', () => {
  const environments: [string, Record<string, string>][] = [
    ['docker-compose.yml', composeEnvironment(composeFile.services.gateway!)],
    ...overlays.map((overlay): [string, Record<string, string>] => [`k8s ${overlay}`, knownValues(k8sEnvironment(overlay, 'gateway'))]),
  ];
  for (const [source, environment] of environments) {
    const config = effectiveConfig(gatewayConfig, { ...gatewayImageEnvironment, ...environment }) as Parameters<typeof devKeyProblems>[0] & { METRICS_HOST: string };
    expect({ source, problems: devKeyProblems(config), metricsHostReachable: !isLoopback(config.METRICS_HOST) }).toEqual({ source, problems: [], metricsHostReachable: true });
  }
});

test('Compose and k8s dev expect the issuer and audience `npm run token` signs for', () => {
  for (const environment of [composeEnvironment(composeFile.services.gateway!), k8sEnvironment('dev', 'gateway').values]) {
    expect([environment.AUTH_ISSUER, environment.AUTH_AUDIENCE]).toEqual([DEV_ISSUER, DEV_AUDIENCE]);
  }
});

test('k8s dev holds every ConfigMap and Secret its containers read; prod reads only the Secrets docs/deploy.md creates', () => {
  const unresolved = (overlay: Overlay) =>
    objectsOfKind(rendered[overlay], 'Deployment').flatMap((deployment) => containerEnvironment(mainContainer(deployment), rendered[overlay]).unresolved);
  expect(unresolved('dev')).toEqual([]);
  // A command in the loop over services.json (`"$service-service-database"`) stands for one Secret per service.
  const documented = [...readFileSync(repoPath('docs', 'deploy.md'), 'utf8').matchAll(/create secret generic (\S+)\s*\\?\s*--from-literal=(\w+)=/g)].flatMap(
    ([, secretName, key]) =>
      secretName!.includes('$service')
        ? services.map(({ name }) => ({ kind: 'Secret', name: secretName!.replaceAll('"', '').replace('$service', name), key }))
        : [{ kind: 'Secret', name: secretName, key }],
  );
  const byName = (a: { name?: string }, b: { name?: string }) => (a.name ?? '').localeCompare(b.name ?? '');
  expect(unresolved('prod').sort(byName)).toEqual(documented.sort(byName));
});

test('Compose and k8s dev bound Redis alike and never let it evict generations, holds or counters', () => {
  const settings = (args: string[]) => ({ maxmemory: args[args.indexOf('--maxmemory') + 1], policy: args[args.indexOf('--maxmemory-policy') + 1] });
  const composed = settings(composeFile.services.redis!.command as string[]);
  const redis = findObject<KubernetesObject & IDeployment>(rendered.dev, 'StatefulSet', 'redis');
  expect(settings(mainContainer(redis).args!)).toEqual(composed);
  expect(composed).toEqual({ maxmemory: expect.stringMatching(/^\d+mb$/), policy: 'noeviction' });
  // Below the container's memory limit, with room for what Redis keeps besides the data.
  const limitMi = Number(/^(\d+)Mi$/.exec(String(mainContainer(redis).resources!.limits!.memory))![1]);
  expect(Number(composed.maxmemory!.replace('mb', ''))).toBeLessThanOrEqual(limitMi * 0.8);
});
