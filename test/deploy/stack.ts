import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { IContainer, IPodTemplateSpec } from 'kubernetes-models/v1';
import { parse } from 'yaml';
import type { ZodObject } from 'zod';
import { readServiceList } from '@app/shared/platform/services';
import { configSchema as gatewayConfig } from '../../gateway/dist/config.js';
import { type KubernetesObject, renderKustomization } from './kustomize.js';

/** What the deploy tests read: the deployables, their Dockerfiles, docker-compose.yml and k8s/. */

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export const repoPath = (...segments: string[]) => path.join(repoRoot, ...segments);

export interface Deployable {
  /** The workspace folder, the Compose service, and the k8s Deployment, Service and image name. */
  name: string;
  configSchema: ZodObject;
  /** Runs migrations on start: its image carries migrations/ and its pods may take time to start. */
  migrates: boolean;
  /** Its Dockerfile: the gateway's own, the root one (WORKSPACE=<name>) for every service. */
  dockerfile: string;
}

/** The services in services.json. */
export const services = readServiceList();

/** The gateway, and every service in services.json. */
export const deployables: Deployable[] = [{ name: 'gateway', configSchema: gatewayConfig, migrates: false, dockerfile: 'gateway/Dockerfile' }];
// One import at a time: jest's module loader can fail imports made concurrently.
for (const { workspace } of services) {
  const { configSchema } = (await import(`../../${workspace}/dist/config.js`)) as { configSchema: ZodObject };
  deployables.push({ name: workspace, configSchema, migrates: true, dockerfile: 'Dockerfile' });
}

/** The environment variables a config schema reads. */
export const variablesRead = (schema: ZodObject) => Object.keys(schema.shape);

/** The variables a config schema cannot do without: those an empty environment fails on. */
export function variablesRequired(schema: ZodObject): string[] {
  const result = schema.safeParse({});
  return result.success ? [] : [...new Set(result.error.issues.map((issue) => String(issue.path[0])))];
}

/** The value the process uses for a variable: the one given, or the schema's default. */
export function effectiveConfig(schema: ZodObject, environment: Record<string, string>): Record<string, unknown> {
  const result = schema.safeParse(environment);
  if (!result.success) throw new Error(result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; '));
  return result.data;
}

// docker-compose.yml

export interface ComposeHealthcheck {
  test: string[];
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
}

export interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile?: string; args?: Record<string, string>; target?: string };
  command?: string[];
  user?: string;
  read_only?: boolean;
  cap_drop?: string[];
  environment?: Record<string, string>;
  env_file?: string[];
  ports?: string[];
  profiles?: string[];
  volumes?: string[];
  healthcheck?: ComposeHealthcheck;
  depends_on?: Record<string, { condition: string }>;
  restart?: string;
  container_name?: string;
  stop_grace_period?: string;
}

export interface ComposeFile {
  name: string;
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

/** docker-compose.yml as Compose reads it: `<<` merges the `x-service` template into each service. */
export const readComposeFile = () => parse(readFileSync(repoPath('docker-compose.yml'), 'utf8'), { merge: true }) as unknown;

export const compose = () => readComposeFile() as ComposeFile;

/** An env file as Compose reads it: KEY=VALUE lines, # comments and blank lines ignored. */
export function readEnvFile(file: string): Record<string, string> {
  const variables: Record<string, string> = {};
  for (const line of readFileSync(repoPath(file), 'utf8').split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (!match) throw new Error(`${file}: "${line}" is not KEY=VALUE`);
    variables[match[1]!] = match[2]!;
  }
  return variables;
}

/** A Compose service's environment: its env files, then `environment`, which wins. */
export function composeEnvironment(service: ComposeService): Record<string, string> {
  const fromFiles = Object.assign({}, ...(service.env_file ?? []).map(readEnvFile)) as Record<string, string>;
  // `${NAME:-default}` as Compose reads it with NAME unset in the shell.
  const environment = Object.entries(service.environment ?? {}).map(([name, value]) => [name, value.replace(/\$\{\w+:-([^}]*)\}/g, '$1')]);
  return { ...fromFiles, ...Object.fromEntries(environment) };
}

// Dockerfiles

export interface DockerfileStage {
  from: string;
  name?: string;
  instructions: { keyword: string; args: string }[];
}

/** A Dockerfile as its stages and instructions; comments dropped, continuation lines joined. */
export function readDockerfile(file: string): DockerfileStage[] {
  const logicalLines = readFileSync(repoPath(file), 'utf8')
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n')
    .replaceAll(/\\\n\s*/g, '')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const stages: DockerfileStage[] = [];
  for (const line of logicalLines) {
    const [, keyword = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    if (keyword.toUpperCase() === 'FROM') {
      const [, from = '', name] = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args) ?? [];
      stages.push({ from, ...(name ? { name } : {}), instructions: [] });
    } else {
      const stage = stages.at(-1);
      if (stage === undefined) throw new Error(`${file}: ${keyword} before FROM`);
      stage.instructions.push({ keyword: keyword.toUpperCase(), args });
    }
  }
  return stages;
}

/** The Dockerfile a deployable is built from, its WORKSPACE build argument (if any) set to its name. */
export function deployableDockerfile({ name, dockerfile }: Pick<Deployable, 'name' | 'dockerfile'>): DockerfileStage[] {
  return readDockerfile(dockerfile).map((stage) => ({
    ...stage,
    instructions: stage.instructions
      .filter(({ keyword }) => keyword !== 'ARG')
      .map((instruction) => ({ ...instruction, args: instruction.args.replaceAll(/"?\$\{?WORKSPACE\}?"?/g, name) })),
  }));
}

export const instructionArgs = (stage: DockerfileStage, keyword: string) =>
  stage.instructions.filter((instruction) => instruction.keyword === keyword).map((instruction) => instruction.args);

// k8s/

export const overlays = ['dev', 'prod'] as const;
export type Overlay = (typeof overlays)[number];

export const renderOverlay = (overlay: Overlay) => renderKustomization(repoPath('k8s', 'overlays', overlay));

export function findObject<T = KubernetesObject>(objects: KubernetesObject[], kind: string, name: string): T {
  const found = objects.find((object) => object.kind === kind && object.metadata.name === name);
  if (found === undefined) throw new Error(`no ${kind} ${name}`);
  return found as T;
}

export const objectsOfKind = <T = KubernetesObject>(objects: KubernetesObject[], kind: string) =>
  objects.filter((object) => object.kind === kind) as T[];

/** The pod template of a Deployment or StatefulSet. */
export function podTemplate(workload: KubernetesObject): IPodTemplateSpec {
  const template = (workload.spec as { template?: IPodTemplateSpec } | undefined)?.template;
  if (template?.spec === undefined) throw new Error(`${workload.kind} ${workload.metadata.name} has no pod template`);
  return template;
}

/** The container named like the workload. */
export function mainContainer(workload: KubernetesObject): IContainer {
  const container = podTemplate(workload).spec!.containers.find((candidate) => candidate.name === workload.metadata.name);
  if (container === undefined) throw new Error(`${workload.kind} ${workload.metadata.name} has no container of its name`);
  return container;
}

export interface ObjectKeyReference {
  kind: 'ConfigMap' | 'Secret';
  name: string;
  /** Undefined for envFrom: every key. */
  key?: string;
}

export interface ContainerEnvironment {
  /** Every variable the container sets, with its value where the render holds it. */
  values: Record<string, string | undefined>;
  /** References to ConfigMaps and Secrets that the render does not hold (created outside git). */
  unresolved: ObjectKeyReference[];
}

function objectData(object: KubernetesObject): Record<string, string> {
  const { data, stringData } = object as { data?: Record<string, string>; stringData?: Record<string, string> };
  const decoded = object.kind === 'Secret'
    ? Object.fromEntries(Object.entries(data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64').toString()]))
    : data;
  return { ...decoded, ...stringData };
}

/** The environment of a container: env values, configMap/secret key references, envFrom. */
export function containerEnvironment(container: IContainer, objects: KubernetesObject[]): ContainerEnvironment {
  const values: Record<string, string | undefined> = {};
  const unresolved: ObjectKeyReference[] = [];
  const lookup = (reference: ObjectKeyReference) => {
    const object = objects.find((candidate) => candidate.kind === reference.kind && candidate.metadata.name === reference.name);
    if (object === undefined) {
      unresolved.push(reference);
      return undefined;
    }
    return objectData(object);
  };
  for (const source of container.envFrom ?? []) {
    const reference: ObjectKeyReference = source.configMapRef
      ? { kind: 'ConfigMap', name: source.configMapRef.name! }
      : { kind: 'Secret', name: source.secretRef!.name! };
    const data = lookup(reference);
    if (data !== undefined) Object.assign(values, data);
  }
  for (const variable of container.env ?? []) {
    const selector = variable.valueFrom?.configMapKeyRef ?? variable.valueFrom?.secretKeyRef;
    if (selector === undefined) {
      values[variable.name] = variable.value ?? '';
      continue;
    }
    const kind = variable.valueFrom?.configMapKeyRef ? 'ConfigMap' : 'Secret';
    const data = lookup({ kind, name: selector.name!, key: selector.key });
    if (data !== undefined && !(selector.key in data)) throw new Error(`${kind} ${selector.name} has no key ${selector.key}`);
    values[variable.name] = data?.[selector.key];
  }
  return { values, unresolved };
}

/** The variables whose values the render holds. */
export const knownValues = (environment: ContainerEnvironment) =>
  Object.fromEntries(Object.entries(environment.values).filter((entry): entry is [string, string] => entry[1] !== undefined));
