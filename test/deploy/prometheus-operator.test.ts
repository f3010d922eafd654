import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { RULES_FILE } from '../../scripts/monitoring.ts';
import { type KubernetesObject, renderKustomization } from './kustomize.js';
import { objectsOfKind, podTemplate, renderOverlay, repoPath, services } from './stack.js';

/**
 * k8s/components/prometheus-operator: optional, so an overlay without it renders no object of the
 * operator's kinds; named in prod's components as docs/deploy.md says, its PodMonitors scrape every
 * Deployment's metrics port and its PrometheusRule carries the rules of k8s/monitoring/rules.yml.
 */

const OPERATOR_API = /^monitoring\.coreos\.com\//;

/** The prod overlay with the component named, as docs/deploy.md says, rendered from a copy of k8s/. */
function renderProdWithOperator(): KubernetesObject[] {
  const root = mkdtempSync(path.join(tmpdir(), 'k8s-operator-'));
  try {
    for (const folder of ['k8s', ...services.map(({ workspace }) => `${workspace}/deploy/k8s`)]) cpSync(repoPath(folder), path.join(root, folder), { recursive: true });
    const kustomization = path.join(root, 'k8s', 'overlays', 'prod', 'kustomization.yaml');
    const text = readFileSync(kustomization, 'utf8');
    const added = text.replace(/^components:$/m, 'components:\n  - ../../components/prometheus-operator');
    if (added === text) throw new Error('k8s/overlays/prod/kustomization.yaml has no components list');
    writeFileSync(kustomization, added);
    return renderKustomization(path.join(root, 'k8s', 'overlays', 'prod'));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const withOperator = renderProdWithOperator();

test.each(['dev', 'prod'] as const)('the %s overlay as it stands renders no object a cluster without the operator\'s CRDs would refuse', (overlay) => {
  expect(renderOverlay(overlay).filter((object) => OPERATOR_API.test(object.apiVersion)).map((object) => object.kind)).toEqual([]);
});

test('with the component, every Deployment is scraped by a PodMonitor, on a port its container has', () => {
  const monitors = objectsOfKind<KubernetesObject & { spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string }[] } }>(withOperator, 'PodMonitor');
  for (const deployment of objectsOfKind(withOperator, 'Deployment').filter((object) => object.metadata.labels?.['app.kubernetes.io/part-of'] === 'rest-microservices')) {
    const template = podTemplate(deployment);
    const labels = template.metadata?.labels ?? {};
    const scrapedBy = monitors.filter((monitor) => Object.entries(monitor.spec.selector.matchLabels).every(([name, value]) => labels[name] === value));
    const ports = template.spec!.containers.flatMap((container) => container.ports ?? []).map((port) => port.name);
    expect({ deployment: deployment.metadata.name, scrapedBy: scrapedBy.length, ports: scrapedBy.flatMap((monitor) => monitor.spec.podMetricsEndpoints.map((endpoint) => ports.includes(endpoint.port))) })
      .toEqual({ deployment: deployment.metadata.name, scrapedBy: 1, ports: [true] });
  }
  expect(monitors.map((monitor) => monitor.metadata.namespace)).toEqual(monitors.map(() => 'rest-microservices'));
});

test('with the component, the PrometheusRule carries the rules file\'s groups', () => {
  const [rule] = objectsOfKind<KubernetesObject & { spec: { groups: unknown } }>(withOperator, 'PrometheusRule');
  expect(rule!.spec.groups).toEqual((parse(readFileSync(RULES_FILE, 'utf8')) as { groups: unknown }).groups);
});
