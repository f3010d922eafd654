import type { INetworkPolicy, INetworkPolicyPeer, INetworkPolicyPort } from 'kubernetes-models/networking.k8s.io/v1';
import type { IContainerPort } from 'kubernetes-models/v1';
import type { KubernetesObject } from './kustomize.js';

/**
 * Decides whether NetworkPolicies let one endpoint open a connection to another, as the Kubernetes
 * NetworkPolicy API specifies: a pod selected by a policy of a direction is isolated in that
 * direction and accepts only what some rule of those policies allows; a connection needs the
 * source's egress and the destination's ingress. Selectors with matchExpressions and ipBlock
 * exceptions are not used here and are rejected.
 */

export type Endpoint =
  | { pod: { namespace: string; labels: Record<string, string>; ports: IContainerPort[] } }
  | { ip: string };

export interface Connection {
  from: Endpoint;
  to: Endpoint;
  port: number;
  protocol?: 'TCP' | 'UDP';
}

export function isAllowed(policies: INetworkPolicy[], namespaces: Record<string, Record<string, string>>, connection: Connection): boolean {
  const { from, to } = connection;
  const egressAllowed = !('pod' in from) || directionAllows(policies, namespaces, 'Egress', from.pod, to, connection);
  const ingressAllowed = !('pod' in to) || directionAllows(policies, namespaces, 'Ingress', to.pod, from, connection);
  return egressAllowed && ingressAllowed;
}

type Pod = Extract<Endpoint, { pod: unknown }>['pod'];

function directionAllows(
  policies: INetworkPolicy[],
  namespaces: Record<string, Record<string, string>>,
  direction: 'Ingress' | 'Egress',
  subject: Pod,
  peer: Endpoint,
  connection: Connection,
): boolean {
  const isolating = policies.filter(
    (policy) =>
      policy.metadata?.namespace === subject.namespace &&
      policyTypes(policy).includes(direction) &&
      matchesLabels(policy.spec!.podSelector?.matchLabels, subject.labels, policy.spec!.podSelector?.matchExpressions),
  );
  if (isolating.length === 0) return true;
  // The destination's ports name the port: the subject's for ingress, the peer's for egress.
  const destinationPorts = direction === 'Ingress' ? subject.ports : 'pod' in peer ? peer.pod.ports : [];
  return isolating.some((policy) => {
    const rules = direction === 'Ingress'
      ? (policy.spec!.ingress ?? []).map((rule) => ({ peers: rule.from, ports: rule.ports }))
      : (policy.spec!.egress ?? []).map((rule) => ({ peers: rule.to, ports: rule.ports }));
    return rules.some(
      (rule) =>
        portsMatch(rule.ports, destinationPorts, connection) &&
        (rule.peers === undefined || rule.peers.length === 0 || rule.peers.some((candidate) => peerMatches(candidate, policy, namespaces, peer))),
    );
  });
}

function policyTypes(policy: INetworkPolicy): string[] {
  return policy.spec!.policyTypes ?? ['Ingress', ...(policy.spec!.egress ? ['Egress'] : [])];
}

function matchesLabels(selector: Record<string, string> | undefined, labels: Record<string, string>, expressions?: unknown[]): boolean {
  if (expressions !== undefined && expressions.length > 0) throw new Error('matchExpressions are not supported');
  return Object.entries(selector ?? {}).every(([key, value]) => labels[key] === value);
}

function peerMatches(
  peer: INetworkPolicyPeer,
  policy: INetworkPolicy,
  namespaces: Record<string, Record<string, string>>,
  endpoint: Endpoint,
): boolean {
  if (peer.ipBlock) {
    if (peer.ipBlock.except?.length) throw new Error('ipBlock.except is not supported');
    return 'ip' in endpoint && inCidr(endpoint.ip, peer.ipBlock.cidr);
  }
  if (!('pod' in endpoint)) return false;
  const { namespace, labels } = endpoint.pod;
  const namespaceMatches = peer.namespaceSelector
    ? matchesLabels(peer.namespaceSelector.matchLabels, namespaces[namespace] ?? {}, peer.namespaceSelector.matchExpressions)
    : namespace === policy.metadata?.namespace;
  const podMatches = peer.podSelector ? matchesLabels(peer.podSelector.matchLabels, labels, peer.podSelector.matchExpressions) : true;
  return namespaceMatches && podMatches;
}

function portsMatch(ports: INetworkPolicyPort[] | undefined, destinationPorts: IContainerPort[], connection: Connection): boolean {
  if (ports === undefined || ports.length === 0) return true;
  const protocol = connection.protocol ?? 'TCP';
  return ports.some((rule) => {
    if ((rule.protocol ?? 'TCP') !== protocol) return false;
    if (rule.port === undefined) return true;
    const number = typeof rule.port === 'number'
      ? rule.port
      : destinationPorts.find((port) => port.name === rule.port && (port.protocol ?? 'TCP') === protocol)?.containerPort;
    if (number === undefined) return false;
    return rule.endPort === undefined ? number === connection.port : connection.port >= number && connection.port <= rule.endPort;
  });
}

function ipv4ToNumber(ip: string): number {
  const octets = ip.split('.').map(Number);
  if (octets.length !== 4 || octets.some((octet) => !Number.isInteger(octet) || octet < 0 || octet > 255)) throw new Error(`${ip} is not IPv4`);
  return octets.reduce((value, octet) => value * 256 + octet, 0);
}

export function inCidr(ip: string, cidr: string): boolean {
  const [network = '', bits = ''] = cidr.split('/');
  const size = 2 ** (32 - Number(bits));
  return Math.floor(ipv4ToNumber(ip) / size) === Math.floor(ipv4ToNumber(network) / size);
}

/** The pods a Deployment or StatefulSet runs, as endpoints. */
export function podEndpoint(workload: KubernetesObject): Endpoint {
  const template = (workload.spec as { template: { metadata: { labels: Record<string, string> }; spec: { containers: { ports?: IContainerPort[] }[] } } }).template;
  return {
    pod: {
      namespace: workload.metadata.namespace ?? 'default',
      labels: template.metadata.labels,
      ports: template.spec.containers.flatMap((container) => container.ports ?? []),
    },
  };
}
