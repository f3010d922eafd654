import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type KubernetesObject, objectId, renderKustomization } from './kustomize.js';
import { overlays, renderOverlay, repoPath, repoRoot, services } from './stack.js';

/**
 * k8s/components/service: the objects every service has, made from each service's name and image.
 * Until it came, each service's folder held its own copy of them; the overlays must render what
 * those copies did, object for object and field for field.
 */

/** The last commit whose services each held a copy of the objects (users-service and products-service). */
const COPIES_COMMIT = '5c94606ed743fbf153118f5c96d760b4b245f467';
const COPIES_SERVICES = ['users-service', 'products-service'];

/** The objects one of `workspaces` owns: its component's, its dev Secret, its MySQL password. */
function serviceObjects(objects: KubernetesObject[], workspaces: string[]): Record<string, unknown> {
  const owned = objects.filter(({ kind, metadata: { name, labels } }) =>
    workspaces.some((workspace) =>
      (labels?.['app.kubernetes.io/component'] === 'service' && [workspace, `gateway-to-${workspace}`].includes(name)) ||
      (kind === 'Secret' && name === `${workspace}-database`)));
  const mysql = objects.find(({ kind, metadata: { name } }) => kind === 'Secret' && name === 'mysql') as { stringData?: Record<string, string> } | undefined;
  const passwords = Object.entries(mysql?.stringData ?? {}).filter(([key]) => workspaces.some((workspace) => key === `${workspace.replace(/-service$/, '').toUpperCase()}_DB_PASSWORD`));
  return { ...Object.fromEntries(owned.map((object) => [objectId(object), object])), mysqlPasswords: Object.fromEntries(passwords) };
}

/** The overlays as `COPIES_COMMIT` rendered them, from its files taken out of git. */
function renderCopies(): Record<string, KubernetesObject[]> {
  const root = mkdtempSync(path.join(tmpdir(), 'k8s-copies-'));
  try {
    try {
      execFileSync('git', ['cat-file', '-e', `${COPIES_COMMIT}^{commit}`], { cwd: repoRoot, stdio: 'ignore' });
    } catch (error) {
      throw new Error(`this test renders k8s/ as commit ${COPIES_COMMIT} had it, and this clone lacks that commit (fetch the history: git fetch --unshallow)`, { cause: error });
    }
    const archive = execFileSync('git', ['archive', COPIES_COMMIT, 'k8s', ...COPIES_SERVICES.map((workspace) => `${workspace}/deploy/k8s`)], { cwd: repoRoot, maxBuffer: 64 * 1024 * 1024 });
    execFileSync('tar', ['-x', '-C', root], { input: archive });
    return Object.fromEntries(overlays.map((overlay) => [overlay, renderKustomization(path.join(root, 'k8s', 'overlays', overlay))]));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/**
 * What changed on purpose in every service's objects since the copies: the drain's timings (issue
 * 47, docs/deploy.md), a longer `preStop` and SHUTDOWN_TIMEOUT_MS; its metrics port (issue 50), in
 * its ConfigMap, its pod's annotations and ports, and its network policy. Applied to the copies'
 * render, so that anything else the component renders differently still fails.
 */
function withChangesSinceCopies(objects: KubernetesObject[]): KubernetesObject[] {
  return objects.map((object) => {
    const changed = structuredClone(object) as KubernetesObject & {
      data?: Record<string, string>;
      spec?: {
        ingress?: unknown[];
        template?: { metadata?: { annotations?: Record<string, string> }; spec?: { containers?: { ports?: unknown[]; lifecycle?: { preStop?: { sleep?: { seconds: number } } } }[] } };
      };
    };
    if (changed.kind === 'ConfigMap' && changed.data?.SHUTDOWN_TIMEOUT_MS !== undefined) Object.assign(changed.data, { SHUTDOWN_TIMEOUT_MS: '15000', METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' });
    for (const container of changed.spec?.template?.spec?.containers ?? []) {
      if (container.lifecycle?.preStop?.sleep) container.lifecycle.preStop.sleep.seconds = 6;
      container.ports?.push({ name: 'metrics', containerPort: 9464, protocol: 'TCP' });
    }
    if (changed.kind === 'Deployment') changed.spec!.template!.metadata!.annotations = { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9464', 'prometheus.io/path': '/metrics' };
    if (changed.kind === 'NetworkPolicy' && changed.spec?.ingress) {
      changed.spec.ingress.push({ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }], ports: [{ protocol: 'TCP', port: 'metrics' }] });
    }
    return changed;
  });
}

const copies = renderCopies();

test.each(overlays)('k8s %s renders the objects of users-service and products-service that their own copies did', (overlay) => {
  const copied = serviceObjects(withChangesSinceCopies(copies[overlay]!), COPIES_SERVICES);
  expect(Object.keys(copied).length).toBeGreaterThan(2 * 8);
  expect(serviceObjects(renderOverlay(overlay), COPIES_SERVICES)).toEqual(copied);
});

test('every service is named wherever the component says `service`, and its settings render as no object', () => {
  const placeholders: string[] = [];
  const visit = (value: unknown, at: string): void => {
    if (typeof value === 'string' && /^(gateway-to-)?service(-database)?$|\/service:/.test(value)) placeholders.push(`${at}: ${value}`);
    if (typeof value !== 'object' || value === null) return;
    // The one `service` that stays: the label every service's pods carry, which lets them reach MySQL.
    for (const [key, child] of Object.entries(value)) if (key !== 'app.kubernetes.io/component') visit(child, `${at}.${key}`);
  };
  const objects = renderKustomization(repoPath('k8s', 'base'));
  for (const object of objects) visit(object, objectId(object));
  expect(placeholders).toEqual([]);
  expect(objects.filter((object) => object.kind === 'ServiceSettings')).toEqual([]);
  for (const { workspace } of services) expect(objects.map(objectId)).toContain(`Deployment/rest-microservices/${workspace}`);
});
