import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { applyJsonPatch, imageName, renderKustomization } from './kustomize.js';

/** The test renderer itself: it must do what kustomize does for the features k8s/ uses. */

let root: string;

function write(file: string, text: string): void {
  mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
  writeFileSync(path.join(root, file), text);
}

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'kustomize-'));
  write('base/kustomization.yaml', 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: shop\nresources: [app.yaml]\n');
  write(
    'base/app.yaml',
    [
      'apiVersion: v1',
      'kind: Namespace',
      'metadata: {name: placeholder}',
      '---',
      'apiVersion: apps/v1',
      'kind: Deployment',
      'metadata: {name: web, labels: {app: web}}',
      'spec:',
      '  selector: {matchLabels: {app: web}}',
      '  template:',
      '    metadata: {labels: {app: web}}',
      '    spec:',
      '      initContainers: [{name: setup, image: example/web:1.0}]',
      '      containers: [{name: web, image: example/web:1.0}, {name: sidecar, image: example/proxy:2.0}]',
      '---',
      'apiVersion: autoscaling/v2',
      'kind: HorizontalPodAutoscaler',
      'metadata: {name: web}',
      'spec: {minReplicas: 2, maxReplicas: 4, scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}',
    ].join('\n'),
  );
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

const overlay = (kustomization: string) => {
  write('overlay/kustomization.yaml', `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../base]\n${kustomization}`);
  return renderKustomization(path.join(root, 'overlay'));
};

test('resources of a folder are that kustomization rendered; namespace applies to namespaced objects and names the Namespace', () => {
  const objects = renderKustomization(path.join(root, 'base'));
  expect(objects.map((object) => [object.kind, object.metadata.name, object.metadata.namespace])).toEqual([
    ['Namespace', 'shop', undefined],
    ['Deployment', 'web', 'shop'],
    ['HorizontalPodAutoscaler', 'web', 'shop'],
  ]);
});

test('images set the name and tag of matching containers and init containers only', () => {
  const [, deployment] = overlay('images:\n  - {name: example/web, newName: registry.test/web, newTag: "2.1"}\n');
  const spec = (deployment!.spec as { template: { spec: { containers: { image: string }[]; initContainers: { image: string }[] } } }).template.spec;
  expect(spec.containers.map((container) => container.image)).toEqual(['registry.test/web:2.1', 'example/proxy:2.0']);
  expect(spec.initContainers[0]!.image).toBe('registry.test/web:2.1');
});

test('labels reach the metadata of every object, not selectors or templates', () => {
  const [, deployment] = overlay('labels:\n  - pairs: {team: shop}\n');
  expect(deployment!.metadata.labels).toEqual({ app: 'web', team: 'shop' });
  expect(deployment!.spec).toMatchObject({ selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } } } });
});

test('JSON 6902 patches apply to every object the target names', () => {
  const objects = overlay(
    ['patches:', '  - target: {kind: HorizontalPodAutoscaler}', '    patch: |-', '      - {op: replace, path: /spec/minReplicas, value: 1}', '      - {op: remove, path: /spec/maxReplicas}'].join('\n'),
  );
  expect(objects[2]!.spec).toEqual({ minReplicas: 1, scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' } });
});

test('a patch whose target matches nothing, or a field the renderer does not implement, is an error', () => {
  expect(() => overlay('patches:\n  - target: {kind: Ingress}\n    patch: "[]"\n')).toThrow(/matches nothing/);
  expect(() => overlay('commonLabels: {team: shop}\n')).toThrow(/"commonLabels" is not supported/);
  expect(() => overlay('labels:\n  - {pairs: {team: shop}, includeSelectors: true}\n')).toThrow(/metadata only/);
});

test('applyJsonPatch adds, replaces and removes in objects and arrays, and rejects missing paths', () => {
  const document = { a: { list: [1, 2] }, 'b/c': { '~d': 1 } };
  expect(
    applyJsonPatch(document, [
      { op: 'add', path: '/a/list/1', value: 9 },
      { op: 'add', path: '/a/list/-', value: 3 },
      { op: 'replace', path: '/b~1c/~0d', value: 2 },
      { op: 'add', path: '/e', value: { f: true } },
      { op: 'remove', path: '/a/list/0' },
    ]),
  ).toEqual({ a: { list: [9, 2, 3] }, 'b/c': { '~d': 2 }, e: { f: true } });
  expect(document.a.list).toEqual([1, 2]);
  expect(() => applyJsonPatch(document, [{ op: 'replace', path: '/missing', value: 1 }])).toThrow(/no such path/);
  expect(() => applyJsonPatch(document, [{ op: 'add', path: '/x/y', value: 1 }])).toThrow(/no such path/);
  expect(() => applyJsonPatch(document, [{ op: 'remove', path: '/a/list/5' }])).toThrow(/out of range/);
});

test('imageName drops the tag and digest but keeps a registry port', () => {
  expect(imageName('registry.test:5000/shop/web:1.2')).toBe('registry.test:5000/shop/web');
  expect(imageName('shop/web@sha256:abc')).toBe('shop/web');
  expect(imageName('mysql')).toBe('mysql');
});
