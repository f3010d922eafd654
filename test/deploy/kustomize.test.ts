import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { imageName, renderKustomization } from './kustomize.js';
import { repoPath } from './stack.js';

/** What the k8s tests stand on: every kustomization renders with the real kustomize, and a broken one says why. */

test.each(['k8s/base', 'k8s/overlays/dev', 'k8s/overlays/prod'])('`kubectl kustomize %s` renders objects with a kind and a name', (directory) => {
  const objects = renderKustomization(repoPath(directory));
  expect(objects.length).toBeGreaterThan(10);
  for (const object of objects) expect(object).toMatchObject({ apiVersion: expect.any(String), kind: expect.any(String), metadata: { name: expect.any(String) } });
});

test('a kustomization kustomize refuses is an error carrying its message', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'kustomize-'));
  try {
    writeFileSync(path.join(root, 'kustomization.yaml'), 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [missing.yaml]\n');
    expect(() => renderKustomization(root)).toThrow(/kustomize .* failed: .*missing\.yaml/s);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('imageName drops the tag and digest but keeps a registry port', () => {
  expect(imageName('registry.test:5000/shop/web:1.2')).toBe('registry.test:5000/shop/web');
  expect(imageName('shop/web@sha256:abc')).toBe('shop/web');
  expect(imageName('mysql')).toBe('mysql');
});
