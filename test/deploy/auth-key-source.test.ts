import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEV_PUBLIC_KEY_JWK } from '@app/shared/platform/dev-auth';
import { authConfigProblems } from '../../gateway/dist/auth/config.js';
import { configSchema as gatewayConfig } from '../../gateway/dist/config.js';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { type KubernetesObject, renderKustomization } from './kustomize.js';
import { isAllowed, podEndpoint } from './network-policy.js';
import { containerEnvironment, effectiveConfig, findObject, knownValues, mainContainer, objectsOfKind, renderOverlay, repoPath, services } from './stack.js';

/**
 * The key tokens are verified with is an overlay's choice of component, never the base's: a public
 * key from the gateway-auth Secret (k8s/components/auth-public-key) or an identity provider's JWKS
 * (k8s/components/auth-jwks). The gateway refuses both at once, and none.
 */

const KEY_SOURCES = ['AUTH_PUBLIC_KEY', 'AUTH_JWKS_URL'];

/** The prod overlay switched to the public key as docs/deploy.md says: its component line changed, rendered from a copy of k8s/. */
function renderProdWithPublicKey(): KubernetesObject[] {
  const root = mkdtempSync(path.join(tmpdir(), 'k8s-public-key-'));
  try {
    for (const folder of ['k8s', ...services.map(({ workspace }) => `${workspace}/deploy/k8s`)]) cpSync(repoPath(folder), path.join(root, folder), { recursive: true });
    const kustomization = path.join(root, 'k8s', 'overlays', 'prod', 'kustomization.yaml');
    const text = readFileSync(kustomization, 'utf8');
    const switched = text.replace(/^( {2}- \.\.\/\.\.\/components\/)auth-jwks$/m, '$1auth-public-key');
    if (switched === text) throw new Error('k8s/overlays/prod/kustomization.yaml names no auth-jwks component line to switch');
    writeFileSync(kustomization, switched);
    return renderKustomization(path.join(root, 'k8s', 'overlays', 'prod'));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const gatewayEnvironment = (objects: KubernetesObject[]) => containerEnvironment(mainContainer(findObject(objects, 'Deployment', 'gateway')), objects);

const choices: [string, KubernetesObject[]][] = [
  ['k8s dev (auth-public-key, the development key)', renderOverlay('dev')],
  ['k8s prod (auth-jwks)', renderOverlay('prod')],
  ['k8s prod switched to auth-public-key', renderProdWithPublicKey()],
];

test('the base names no key source: each overlay chooses one', () => {
  const { values } = gatewayEnvironment(renderKustomization(repoPath('k8s', 'base')));
  expect(KEY_SOURCES.filter((variable) => variable in values)).toEqual([]);
});

test.each(choices)('%s: the gateway has exactly one key source, and its config accepts the rendered environment', (_choice, objects) => {
  const rendered = gatewayEnvironment(objects);
  const { values } = rendered;
  expect(KEY_SOURCES.filter((variable) => values[variable] !== '' && variable in values)).toHaveLength(1);
  // A key in a Secret created outside git is the operator's: any key stands for it.
  const keys = Object.fromEntries(KEY_SOURCES.filter((variable) => variable in values && values[variable] === undefined).map((variable) => [variable, JSON.stringify(DEV_PUBLIC_KEY_JWK)]));
  const environment = { ...knownValues(rendered), ...keys };
  expect(authConfigProblems(effectiveConfig(gatewayConfig, environment) as Parameters<typeof authConfigProblems>[0])).toEqual([]);
});

test('switched to the public key, prod reads the gateway-auth Secret, which docs/deploy.md creates', () => {
  const [, objects] = choices[2]!;
  expect(gatewayEnvironment(objects).unresolved).toContainEqual({ kind: 'Secret', name: 'gateway-auth', key: 'AUTH_PUBLIC_KEY' });
  expect(readFileSync(repoPath('docs', 'deploy.md'), 'utf8')).toMatch(/create secret generic gateway-auth\s*\\?\s*--from-file=AUTH_PUBLIC_KEY=/);
});

test('with auth-jwks, the gateway alone may reach the identity provider, over HTTPS', () => {
  const [, objects] = choices[1]!;
  const policies = objectsOfKind<INetworkPolicy>(objects, 'NetworkPolicy');
  const cidr = findObject<INetworkPolicy>(objects, 'NetworkPolicy', 'gateway-to-identity-provider').spec!.egress![0]!.to![0]!.ipBlock!.cidr;
  const identityProvider = { ip: cidr.replace(/\.0\/\d+$/, '.10') };
  const namespaces = { 'rest-microservices': { 'kubernetes.io/metadata.name': 'rest-microservices' } };
  const reaches = (workload: string, port: number) => isAllowed(policies, namespaces, { from: podEndpoint(findObject(objects, 'Deployment', workload)), to: identityProvider, port });
  expect(reaches('gateway', 443)).toBe(true);
  expect(reaches('gateway', 80)).toBe(false);
  for (const { workspace } of services) expect(reaches(workspace, 443)).toBe(false);
});
