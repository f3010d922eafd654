import { readFileSync } from 'node:fs';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import type { IDeployment } from 'kubernetes-models/apps/v1';
import type { IIngress } from 'kubernetes-models/networking.k8s.io/v1';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1';
import type { IConfigMap, IContainer, IService, IServiceAccount } from 'kubernetes-models/v1';
import { DEFAULT_MEMORY_LIMIT_BYTES } from '../../gateway/dist/load-shedding/overload.js';
import { DRAIN_IDLE_GRACE_MS, RELEASE_TIMEOUT_MS } from '../../shared/dist/platform/server.js';
import { type KubernetesObject, objectId, renderKustomization } from './kustomize.js';
import { schemaErrors, unknownFields } from './kubernetes-schema.js';
import {
  containerEnvironment,
  deployables,
  effectiveConfig,
  findObject,
  knownValues,
  mainContainer,
  objectsOfKind,
  type Overlay,
  overlays,
  podTemplate,
  repoPath,
} from './stack.js';

/** k8s/: valid objects, secure by default, every deployable scaling on its own. */

const NAMESPACE = 'rest-microservices';
const builds: [string, KubernetesObject[]][] = [
  ['base', renderKustomization(repoPath('k8s', 'base'))],
  ...overlays.map((overlay): [string, KubernetesObject[]] => [overlay, renderKustomization(repoPath('k8s', 'overlays', overlay))]),
];
const rendered = Object.fromEntries(builds) as Record<'base' | Overlay, KubernetesObject[]>;

/** How long CoreDNS answers for a cluster name may be cached (its kubernetes plugin's default TTL). */
const CLUSTER_DNS_TTL_SECONDS = 5;
/** For a pod's endpoint removal to reach CoreDNS and every node's proxy. */
const ENDPOINT_PROPAGATION_SECONDS = 1;

/**
 * The drain's timings that a Deployment breaks (docs/deploy.md says why each holds), given its
 * process's SHUTDOWN_TIMEOUT_MS and the longest a request may take once in: the gateway's
 * UPSTREAM_TIMEOUT_MS, the gateway's wait for a service.
 */
function brokenDrainTimings(deployment: IDeployment, shutdownTimeoutMs: number, longestRequestMs: number): string[] {
  const pause = mainContainer(deployment as KubernetesObject).lifecycle?.preStop?.sleep?.seconds ?? 0;
  const gracePeriod = podTemplate(deployment as KubernetesObject).spec!.terminationGracePeriodSeconds ?? 30;
  const relations: [string, boolean][] = [
    ['preStop >= cluster DNS TTL + endpoint propagation', pause >= CLUSTER_DNS_TTL_SECONDS + ENDPOINT_PROPAGATION_SECONDS],
    ['SHUTDOWN_TIMEOUT_MS >= DRAIN_IDLE_GRACE_MS + UPSTREAM_TIMEOUT_MS', shutdownTimeoutMs >= DRAIN_IDLE_GRACE_MS + longestRequestMs],
    ['terminationGracePeriodSeconds >= preStop + SHUTDOWN_TIMEOUT_MS + RELEASE_TIMEOUT_MS + 1 s', gracePeriod >= pause + (shutdownTimeoutMs + RELEASE_TIMEOUT_MS) / 1000 + 1],
  ];
  return relations.filter(([, holds]) => !holds).map(([relation]) => relation);
}

/** The gateway's UPSTREAM_TIMEOUT_MS in a build: how long it waits for a service's answer. */
function upstreamTimeoutMs(objects: KubernetesObject[]): number {
  const gateway = deployables.find(({ name }) => name === 'gateway')!;
  const environment = knownValues(containerEnvironment(mainContainer(findObject(objects, 'Deployment', 'gateway')), objects));
  return effectiveConfig(gateway.configSchema, environment).UPSTREAM_TIMEOUT_MS as number;
}

describe.each(builds)('k8s %s, rendered by kubectl kustomize', (_build, objects) => {
  test('every object validates against the Kubernetes OpenAPI schema', async () => {
    const errors = await Promise.all(objects.map(async (object) => (await schemaErrors(object)).map((error) => `${objectId(object)}: ${error}`)));
    expect(errors.flat()).toEqual([]);
  });

  test('no object has a field the Kubernetes API does not define', () => {
    expect(objects.flatMap((object) => unknownFields(object).map((field) => `${objectId(object)}: ${field}`))).toEqual([]);
  });

  test('everything lives in the rest-microservices namespace, which enforces the restricted Pod Security Standard', () => {
    const namespace = findObject(objects, 'Namespace', NAMESPACE);
    expect(namespace.metadata.labels).toMatchObject({ 'pod-security.kubernetes.io/enforce': 'restricted' });
    for (const object of objects.filter((candidate) => candidate.kind !== 'Namespace')) expect(object.metadata.namespace).toBe(NAMESPACE);
  });

  test('every pod meets the restricted Pod Security Standard and mounts no service account token', () => {
    for (const workload of objects.filter((object) => object.kind === 'Deployment' || object.kind === 'StatefulSet')) {
      const { spec } = podTemplate(workload);
      expect(spec!.automountServiceAccountToken).toBe(false);
      expect(spec!.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      // A numeric user: the kubelet cannot check that an image's named USER is not root.
      expect(spec!.securityContext!.runAsUser).toBeGreaterThan(0);
      for (const container of spec!.containers) {
        expect(container.securityContext).toEqual({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
          capabilities: { drop: ['ALL'] },
        });
        expect(container.resources?.requests).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
        expect(container.resources?.limits).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
      }
    }
  });
});

test('the drain timings check fails on a manifest that breaks each relation', () => {
  const deployment = structuredClone(findObject(rendered.prod, 'Deployment', 'products-service')) as KubernetesObject & IDeployment;
  const longestRequestMs = upstreamTimeoutMs(rendered.prod);
  const shutdownTimeoutMs = DRAIN_IDLE_GRACE_MS + longestRequestMs;
  expect(brokenDrainTimings(deployment, shutdownTimeoutMs, longestRequestMs)).toEqual([]);
  expect(brokenDrainTimings(deployment, shutdownTimeoutMs - 1, longestRequestMs)).toEqual(['SHUTDOWN_TIMEOUT_MS >= DRAIN_IDLE_GRACE_MS + UPSTREAM_TIMEOUT_MS']);
  mainContainer(deployment).lifecycle!.preStop!.sleep!.seconds = CLUSTER_DNS_TTL_SECONDS;
  expect(brokenDrainTimings(deployment, shutdownTimeoutMs, longestRequestMs)).toEqual(['preStop >= cluster DNS TTL + endpoint propagation']);
  mainContainer(deployment).lifecycle!.preStop!.sleep!.seconds = 60;
  expect(brokenDrainTimings(deployment, shutdownTimeoutMs, longestRequestMs)).toEqual(['terminationGracePeriodSeconds >= preStop + SHUTDOWN_TIMEOUT_MS + RELEASE_TIMEOUT_MS + 1 s']);
});

test('the checks above fail on a wrong type and on a misspelt field', async () => {
  const deployment = structuredClone(findObject(rendered.base, 'Deployment', 'gateway')) as KubernetesObject & IDeployment;
  const container = deployment.spec!.template.spec!.containers[0] as IContainer & Record<string, unknown>;
  container.ports = [{ name: 'http', containerPort: 'eighty' as unknown as number }];
  container.readinesProbe = container.readinessProbe;
  expect(await schemaErrors(deployment)).toEqual([expect.stringContaining('containerPort must be integer')]);
  expect(unknownFields(deployment)).toEqual(['.spec.template.spec.containers[0].readinesProbe']);
});

describe.each(overlays)('k8s overlay %s', (overlay) => {
  const objects = rendered[overlay];

  describe.each(deployables)('$name', ({ name, configSchema, migrates }) => {
    const deployment = findObject<KubernetesObject & IDeployment>(objects, 'Deployment', name);
    const template = podTemplate(deployment);
    const container = mainContainer(deployment);
    const config = effectiveConfig(configSchema, knownValues(containerEnvironment(container, objects)));

    test('readiness on /readyz, liveness on /healthz, a startup probe when migrations run on start', () => {
      expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'http' });
      expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
      if (migrates) {
        const { httpGet, periodSeconds = 10, failureThreshold = 3 } = container.startupProbe ?? {};
        expect(httpGet).toEqual({ path: '/healthz', port: 'http' });
        // Waiting for another replica's migration lock takes up to 60 s (shared/src/platform/migrate.ts), then migrating.
        expect(periodSeconds * failureThreshold).toBeGreaterThanOrEqual(120);
      }
    });

    test('rolls out without losing capacity; preStop, the drain and the grace period follow from one another', () => {
      expect(deployment.spec!.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
      expect(brokenDrainTimings(deployment, config.SHUTDOWN_TIMEOUT_MS as number, upstreamTimeoutMs(objects))).toEqual([]);
    });

    test('runs as its own ServiceAccount, which mounts no token', () => {
      expect(template.spec!.serviceAccountName).toBe(name);
      expect(findObject<IServiceAccount>(objects, 'ServiceAccount', name).automountServiceAccountToken).toBe(false);
    });

    test('scales on its own: an autoscaling/v2 HPA on CPU owns the replica count, a PDB limits disruptions', () => {
      expect(deployment.spec!.replicas).toBeUndefined();
      const autoscaler = findObject<KubernetesObject & IHorizontalPodAutoscaler>(objects, 'HorizontalPodAutoscaler', name);
      expect(autoscaler.apiVersion).toBe('autoscaling/v2');
      expect(autoscaler.spec!.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name });
      expect(autoscaler.spec!.minReplicas).toBeLessThan(autoscaler.spec!.maxReplicas);
      expect(autoscaler.spec!.metrics).toEqual([
        { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: expect.any(Number) } } },
      ]);
      const budget = findObject<IPodDisruptionBudget>(objects, 'PodDisruptionBudget', name);
      expect(budget.spec!.maxUnavailable).toBe(1);
      expect(template.metadata!.labels).toMatchObject(budget.spec!.selector!.matchLabels!);
      // No other deployable's pods fall under this budget.
      for (const other of deployables.filter((candidate) => candidate.name !== name)) {
        expect(podTemplate(findObject(objects, 'Deployment', other.name)).metadata!.labels).not.toMatchObject(budget.spec!.selector!.matchLabels!);
      }
    });

    test('its Service selects its pods only and targets its named HTTP port (never the metrics port)', () => {
      const service = findObject<IService>(objects, 'Service', name);
      expect(template.metadata!.labels).toMatchObject(service.spec!.selector!);
      expect(service.spec!.ports).toEqual([expect.objectContaining({ name: 'http', targetPort: 'http', protocol: 'TCP' })]);
      const metrics = config.METRICS_PORT === undefined ? [] : [{ name: 'metrics', containerPort: config.METRICS_PORT, protocol: 'TCP' }];
      expect(container.ports).toEqual([{ name: 'http', containerPort: config.PORT, protocol: 'TCP' }, ...metrics]);
    });

    test('Prometheus is told where its metrics are, if it has a metrics port', () => {
      const annotations = template.metadata!.annotations ?? {};
      if (config.METRICS_PORT === undefined) {
        expect(annotations['prometheus.io/scrape']).toBeUndefined();
        return;
      }
      expect(annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(config.METRICS_PORT), 'prometheus.io/path': '/metrics' });
    });

    test('the gateway sees one address per ready replica: a service behind it has a headless Service', () => {
      const service = findObject<IService>(objects, 'Service', name);
      if (name === 'gateway') {
        expect(service.spec!.clusterIP).toBeUndefined();
        return;
      }
      expect(service.spec!.clusterIP).toBe('None');
      // Not-ready pods stay out of DNS, so the gateway never balances onto a replica still starting.
      expect(service.spec!.publishNotReadyAddresses).not.toBe(true);
    });

    test('non-secret settings come from its ConfigMap; credentials only through secretKeyRef', () => {
      expect(container.envFrom).toEqual([{ configMapRef: { name } }]);
      for (const [key, value] of Object.entries(findObject<IConfigMap>(objects, 'ConfigMap', name).data!)) {
        expect(key).not.toMatch(/PASSWORD|SECRET|TOKEN/);
        expect(value).not.toMatch(/\/\/[^/]*@/);
      }
      for (const variable of container.env ?? []) expect(Object.keys(variable.valueFrom ?? {})).toEqual(['secretKeyRef']);
    });
  });

  test('the Ingress sends every path to the gateway Service', () => {
    const ingress = findObject<IIngress>(objects, 'Ingress', 'gateway');
    const paths = ingress.spec!.rules!.flatMap((rule) => rule.http!.paths);
    expect(paths).toEqual([{ path: '/', pathType: 'Prefix', backend: { service: { name: 'gateway', port: { name: 'http' } } } }]);
  });
});

test('prod runs more replicas than dev, serves a host over TLS, and keeps no Secret in git', () => {
  for (const { name } of deployables) {
    const minimum = (overlay: Overlay) => findObject<IHorizontalPodAutoscaler>(rendered[overlay], 'HorizontalPodAutoscaler', name).spec!.minReplicas!;
    expect(minimum('prod')).toBeGreaterThan(minimum('dev'));
    expect(minimum('prod')).toBeGreaterThanOrEqual(2);
  }
  const ingress = findObject<IIngress>(rendered.prod, 'Ingress', 'gateway');
  expect(ingress.spec!.tls).toEqual([{ hosts: [ingress.spec!.rules![0]!.host], secretName: 'gateway-tls' }]);
  expect(objectsOfKind(rendered.prod, 'Secret')).toEqual([]);
});

test('dev runs MySQL and Redis as StatefulSets behind their Services, MySQL with a volume claim and the Compose init script', () => {
  const objects = rendered.dev;
  for (const name of ['mysql', 'redis']) {
    const statefulSet = findObject(objects, 'StatefulSet', name);
    expect(statefulSet.spec).toMatchObject({ serviceName: name, replicas: 1 });
    expect(podTemplate(statefulSet).metadata!.labels).toMatchObject(findObject<IService>(objects, 'Service', name).spec!.selector!);
  }
  expect(mainContainer(findObject(objects, 'StatefulSet', 'mysql')).image).toBe('mysql:8.4');
  expect(mainContainer(findObject(objects, 'StatefulSet', 'redis')).image).toBe('redis:7');
  expect(findObject(objects, 'StatefulSet', 'mysql').spec).toMatchObject({ volumeClaimTemplates: [{ metadata: { name: 'data' } }] });
  const initScript = findObject<IConfigMap>(objects, 'ConfigMap', 'mysql-init').data!['create-service-users.sh'];
  expect(initScript).toBe(readFileSync(repoPath('compose', 'mysql-init', 'create-service-users.sh'), 'utf8'));
});

test('the gateway’s memory limit where it finds no cgroup limit is its container’s limit in every overlay (docs/architecture.md)', () => {
  const limits = overlays.map((overlay) => mainContainer(findObject<KubernetesObject & IDeployment>(rendered[overlay], 'Deployment', 'gateway')).resources?.limits?.memory);
  const bytes = limits.map((limit) => {
    const [, mebibytes] = /^(\d+)Mi$/.exec(String(limit)) ?? [];
    return Number(mebibytes) * 1024 * 1024;
  });
  expect(bytes).toEqual(overlays.map(() => DEFAULT_MEMORY_LIMIT_BYTES));
});
