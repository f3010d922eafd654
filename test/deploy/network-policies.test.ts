import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { type Connection, type Endpoint, inCidr, isAllowed, podEndpoint } from './network-policy.js';
import { findObject, objectsOfKind, type Overlay, renderOverlay, services } from './stack.js';

/**
 * Isolation, as the NetworkPolicies of each overlay decide it: only the gateway reaches the
 * services (every one in services.json), only the services reach MySQL, only the gateway reaches Redis, and the gateway alone
 * takes traffic from outside the namespace.
 */

const NAMESPACE = 'rest-microservices';
const namespaceLabels = {
  [NAMESPACE]: { 'kubernetes.io/metadata.name': NAMESPACE },
  'kube-system': { 'kubernetes.io/metadata.name': 'kube-system' },
  'ingress-controller': { 'kubernetes.io/metadata.name': 'ingress-controller' },
};
const kubeDns: Endpoint = { pod: { namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' }, ports: [] } };
const ingressController: Endpoint = { pod: { namespace: 'ingress-controller', labels: { app: 'ingress-controller' }, ports: [] } };
const internet: Endpoint = { ip: '203.0.113.7' };

/** The endpoints of one overlay: its pods, and (prod) the managed datastores at an address of their allowed range. */
function endpointsOf(overlay: Overlay): { policies: INetworkPolicy[]; endpoints: Record<string, Endpoint> } {
  const objects = renderOverlay(overlay);
  const policies = objectsOfKind<INetworkPolicy>(objects, 'NetworkPolicy');
  const pod = (kind: string, name: string) => podEndpoint(findObject(objects, kind, name));
  const firstAddress = (policyName: string): Endpoint => {
    const cidr = findObject<INetworkPolicy>(objects, 'NetworkPolicy', policyName).spec!.egress![0]!.to![0]!.ipBlock!.cidr;
    return { ip: cidr.replace(/\.0\/\d+$/, '.10') };
  };
  return {
    policies,
    endpoints: {
      gateway: pod('Deployment', 'gateway'),
      ...Object.fromEntries(services.map(({ name, workspace }) => [name, pod('Deployment', workspace)])),
      mysql: overlay === 'dev' ? pod('StatefulSet', 'mysql') : firstAddress('services-to-mysql'),
      redis: overlay === 'dev' ? pod('StatefulSet', 'redis') : firstAddress('gateway-to-redis'),
    },
  };
}

describe.each(['dev', 'prod'] as const)('k8s overlay %s', (overlay) => {
  const { policies, endpoints } = endpointsOf(overlay);
  const { gateway } = endpoints as { gateway: Endpoint };
  const allowed = (connection: Connection) => isAllowed(policies, namespaceLabels, connection);
  // Every service listens on 8080 in its container, as the gateway does.
  const ports: Record<string, number> = { ...Object.fromEntries(Object.keys(endpoints).map((name) => [name, 8080])), mysql: 3306, redis: 6379 };
  // In prod the datastores are outside the cluster: no policy of the namespace governs what they open.
  const inCluster = Object.keys(endpoints).filter((name) => 'pod' in endpoints[name]!);
  const expected = new Set(['gateway→redis', ...services.flatMap(({ name }) => [`gateway→${name}`, `${name}→mysql`])]);
  const pairs = inCluster.flatMap((from) => Object.keys(endpoints).filter((to) => to !== from).map((to) => [from, to]));

  test.each(pairs)('%s → %s', (from, to) => {
    const connection = { from: endpoints[from!]!, to: endpoints[to!]!, port: ports[to!]! };
    expect(allowed(connection)).toBe(expected.has(`${from}→${to}`));
  });

  test('from outside the namespace only the gateway is reachable, and only on its HTTP port', () => {
    expect(allowed({ from: ingressController, to: gateway, port: 8080 })).toBe(true);
    expect(allowed({ from: internet, to: gateway, port: 8080 })).toBe(true);
    expect(allowed({ from: ingressController, to: gateway, port: 9229 })).toBe(false);
    for (const name of inCluster.filter((candidate) => candidate !== 'gateway')) {
      expect(allowed({ from: ingressController, to: endpoints[name]!, port: ports[name]! })).toBe(false);
      expect(allowed({ from: internet, to: endpoints[name]!, port: ports[name]! })).toBe(false);
    }
  });

  test('every pod resolves names through kube-dns, and reaches nothing else outside', () => {
    for (const name of inCluster) {
      const from = endpoints[name]!;
      expect(allowed({ from, to: kubeDns, port: 53, protocol: 'UDP' })).toBe(true);
      expect(allowed({ from, to: kubeDns, port: 53, protocol: 'TCP' })).toBe(true);
      expect(allowed({ from, to: internet, port: 443 })).toBe(false);
    }
  });
});

test('the evaluator: an unselected pod is open, ipBlock matches by range, named ports resolve on the destination', () => {
  const policy: INetworkPolicy = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'web', namespace: 'shop' },
    spec: {
      podSelector: { matchLabels: { app: 'web' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ ports: [{ port: 'http' }] }],
      egress: [{ to: [{ ipBlock: { cidr: '10.1.0.0/16' } }] }],
    },
  };
  const web: Endpoint = { pod: { namespace: 'shop', labels: { app: 'web' }, ports: [{ name: 'http', containerPort: 8000 }] } };
  const other: Endpoint = { pod: { namespace: 'shop', labels: { app: 'other' }, ports: [] } };
  expect(isAllowed([policy], {}, { from: other, to: web, port: 8000 })).toBe(true);
  expect(isAllowed([policy], {}, { from: other, to: web, port: 8001 })).toBe(false);
  expect(isAllowed([policy], {}, { from: web, to: { ip: '10.1.200.3' }, port: 5432 })).toBe(true);
  expect(isAllowed([policy], {}, { from: web, to: other, port: 80 })).toBe(false);
  expect(isAllowed([policy], {}, { from: other, to: { ip: '192.0.2.1' }, port: 80 })).toBe(true);
  expect(inCidr('10.100.1.255', '10.100.1.0/24')).toBe(true);
  expect(inCidr('10.100.2.0', '10.100.1.0/24')).toBe(false);
});
