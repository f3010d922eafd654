import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * Renders a kustomization as `kustomize build` would, for the subset of kustomize this repository's
 * k8s/ uses: resources (files and kustomization folders), JSON 6902 patches, images, namespace and
 * labels (metadata only). Any other field is an error, so a manifest never relies on a feature the
 * tests would silently skip.
 */

export interface KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

interface PatchTarget {
  group?: string;
  version?: string;
  kind?: string;
  name?: string;
}

type JsonPatchOperation =
  | { op: 'add' | 'replace'; path: string; value: unknown }
  | { op: 'remove'; path: string };

interface Kustomization {
  apiVersion?: string;
  kind?: string;
  namespace?: string;
  resources?: string[];
  labels?: { pairs: Record<string, string>; includeSelectors?: boolean; includeTemplates?: boolean }[];
  images?: { name: string; newName?: string; newTag?: string; digest?: string }[];
  patches?: { target: PatchTarget; patch?: string; path?: string }[];
}

const SUPPORTED_FIELDS = new Set(['apiVersion', 'kind', 'namespace', 'resources', 'labels', 'images', 'patches']);

function readYamlDocuments(file: string): unknown[] {
  return parseAllDocuments(readFileSync(file, 'utf8')).map((document) => {
    if (document.errors.length > 0) throw new Error(`${file}: ${document.errors.map((e) => e.message).join('; ')}`);
    return document.toJS();
  }).filter((value) => value !== null);
}

export function renderKustomization(directory: string): KubernetesObject[] {
  const file = path.join(directory, 'kustomization.yaml');
  const [kustomization] = readYamlDocuments(file) as Kustomization[];
  if (kustomization === undefined) throw new Error(`${file} is empty`);
  for (const field of Object.keys(kustomization)) {
    if (!SUPPORTED_FIELDS.has(field)) throw new Error(`${file}: "${field}" is not supported by the test renderer`);
  }
  if (kustomization.apiVersion !== 'kustomize.config.k8s.io/v1beta1' || kustomization.kind !== 'Kustomization') {
    throw new Error(`${file}: not a kustomize.config.k8s.io/v1beta1 Kustomization`);
  }

  let objects = (kustomization.resources ?? []).flatMap((resource) => loadResource(path.join(directory, resource)));
  for (const { target, patch, path: patchFile } of kustomization.patches ?? []) {
    const source = patch ?? (patchFile === undefined ? undefined : readFileSync(path.join(directory, patchFile), 'utf8'));
    if (source === undefined) throw new Error(`${file}: a patch needs "patch" or "path"`);
    const operations = readJsonPatch(source, file);
    const matched = objects.filter((object) => matchesTarget(object, target));
    if (matched.length === 0) throw new Error(`${file}: patch target ${JSON.stringify(target)} matches nothing`);
    objects = objects.map((object) => (matched.includes(object) ? applyJsonPatch(object, operations) : object));
  }
  if (kustomization.namespace !== undefined) objects = objects.map((object) => setNamespace(object, kustomization.namespace!));
  for (const { pairs, includeSelectors, includeTemplates } of kustomization.labels ?? []) {
    if (includeSelectors || includeTemplates) throw new Error(`${file}: labels reach metadata only in the test renderer`);
    objects = objects.map((object) => ({
      ...object,
      metadata: { ...object.metadata, labels: { ...object.metadata.labels, ...pairs } },
    }));
  }
  for (const image of kustomization.images ?? []) objects = objects.map((object) => setImage(object, image));

  const ids = new Set<string>();
  for (const object of objects) {
    const id = objectId(object);
    if (ids.has(id)) throw new Error(`${file}: ${id} is defined twice`);
    ids.add(id);
  }
  return objects;
}

export function objectId(object: KubernetesObject): string {
  return `${object.kind}/${object.metadata.namespace ?? ''}/${object.metadata.name}`;
}

function loadResource(resource: string): KubernetesObject[] {
  if (statSync(resource).isDirectory()) return renderKustomization(resource);
  return readYamlDocuments(resource).map((document) => {
    const object = document as KubernetesObject;
    if (typeof object.apiVersion !== 'string' || typeof object.kind !== 'string' || typeof object.metadata?.name !== 'string') {
      throw new Error(`${resource}: every document must have apiVersion, kind and metadata.name`);
    }
    return object;
  });
}

function matchesTarget(object: KubernetesObject, target: PatchTarget): boolean {
  const [group, version] = object.apiVersion.includes('/') ? object.apiVersion.split('/') : ['', object.apiVersion];
  return (
    (target.group === undefined || target.group === group) &&
    (target.version === undefined || target.version === version) &&
    (target.kind === undefined || target.kind === object.kind) &&
    (target.name === undefined || target.name === object.metadata.name)
  );
}

function readJsonPatch(source: string, file: string): JsonPatchOperation[] {
  const [operations] = parseAllDocuments(source).map((document) => document.toJS());
  if (!Array.isArray(operations)) throw new Error(`${file}: only JSON 6902 patches (a list of operations) are supported`);
  return operations as JsonPatchOperation[];
}

/** RFC 6901: "/a/b~1c/0" names a → "b/c" → 0. */
function pointerTokens(pointer: string): string[] {
  if (!pointer.startsWith('/')) throw new Error(`"${pointer}" is not a JSON pointer`);
  return pointer.slice(1).split('/').map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'));
}

/** RFC 6902 add, replace and remove, on a copy. */
export function applyJsonPatch<T>(document: T, operations: JsonPatchOperation[]): T {
  const result = structuredClone(document);
  for (const operation of operations) {
    const tokens = pointerTokens(operation.path);
    const last = tokens.pop()!;
    let parent: unknown = result;
    for (const token of tokens) {
      parent = (parent as Record<string, unknown>)?.[token];
      if (typeof parent !== 'object' || parent === null) throw new Error(`${operation.op} ${operation.path}: no such path`);
    }
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last);
      const inRange = Number.isInteger(index) && index >= 0 && index < parent.length + (operation.op === 'add' ? 1 : 0);
      if (!inRange) throw new Error(`${operation.op} ${operation.path}: index out of range`);
      if (operation.op === 'add') parent.splice(index, 0, structuredClone(operation.value));
      else if (operation.op === 'replace') parent[index] = structuredClone(operation.value);
      else parent.splice(index, 1);
      continue;
    }
    const record = parent as Record<string, unknown>;
    if (operation.op !== 'add' && !(last in record)) throw new Error(`${operation.op} ${operation.path}: no such path`);
    if (operation.op === 'remove') Reflect.deleteProperty(record, last);
    else record[last] = structuredClone(operation.value);
  }
  return result;
}

function setNamespace(object: KubernetesObject, namespace: string): KubernetesObject {
  // Namespace is the only cluster-scoped kind here; kustomize renames it to the kustomization's namespace.
  if (object.kind === 'Namespace') return { ...object, metadata: { ...object.metadata, name: namespace } };
  return { ...object, metadata: { ...object.metadata, namespace } };
}

/** An image reference without its tag or digest: `registry:5000/a/b:1.0` → `registry:5000/a/b`. */
export function imageName(reference: string): string {
  const withoutDigest = reference.split('@', 1)[0]!;
  const lastSlash = withoutDigest.lastIndexOf('/');
  const lastColon = withoutDigest.lastIndexOf(':');
  return lastColon > lastSlash ? withoutDigest.slice(0, lastColon) : withoutDigest;
}

function setImage(object: KubernetesObject, image: NonNullable<Kustomization['images']>[number]): KubernetesObject {
  const podSpec = (object.spec as { template?: { spec?: PodSpecImages } } | undefined)?.template?.spec;
  if (podSpec === undefined) return object;
  const rewrite = (container: { image?: string }) => {
    if (container.image === undefined || imageName(container.image) !== image.name) return container;
    const tag = image.digest ? `@${image.digest}` : image.newTag ? `:${image.newTag}` : container.image.slice(image.name.length);
    return { ...container, image: `${image.newName ?? image.name}${tag}` };
  };
  const rendered = structuredClone(object) as KubernetesObject & { spec: { template: { spec: PodSpecImages } } };
  const renderedPodSpec = rendered.spec.template.spec;
  if (renderedPodSpec.containers) renderedPodSpec.containers = renderedPodSpec.containers.map(rewrite);
  if (renderedPodSpec.initContainers) renderedPodSpec.initContainers = renderedPodSpec.initContainers.map(rewrite);
  return rendered;
}

interface PodSpecImages {
  containers?: { image?: string }[];
  initContainers?: { image?: string }[];
}
