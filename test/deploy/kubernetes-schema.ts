import * as clientModels from '@kubernetes/client-node/dist/gen/models/all.js';
import type { KubernetesObject } from './kustomize.js';

/**
 * Validation against the Kubernetes OpenAPI schemas, offline, from two npm packages:
 * - kubernetes-models: one class per kind with a validator compiled from the OpenAPI schema
 *   (types, required fields, enums, formats such as quantities);
 * - @kubernetes/client-node: models generated from the same OpenAPI document, whose field lists
 *   catch the unknown (misspelt) fields that the schema's open objects let through and that
 *   `kubectl apply`, validating strictly, rejects.
 */

interface ModelClass {
  new (data: unknown): { validate(): void };
}

const modelModules = new Map<string, Promise<Record<string, ModelClass | undefined>>>();
let lastImport: Promise<unknown> = Promise.resolve();

/**
 * kubernetes-models' module for an apiVersion, imported one at a time: jest's ESM loader fails
 * ("request for './model.js' is not in cache") when two imports share a dependency in flight.
 */
function modelsOf(apiVersion: string): Promise<Record<string, ModelClass | undefined>> {
  let models = modelModules.get(apiVersion);
  if (models === undefined) {
    models = lastImport.then(() => import(`kubernetes-models/${apiVersion}`) as Promise<Record<string, ModelClass | undefined>>);
    lastImport = models.catch(() => undefined);
    modelModules.set(apiVersion, models);
  }
  return models;
}

/** The kubernetes-models validation errors of an object, or [] when it is valid. */
export async function schemaErrors(object: KubernetesObject): Promise<string[]> {
  const models = await modelsOf(object.apiVersion);
  const Model = models[object.kind];
  if (Model === undefined) return [`no schema for ${object.apiVersion} ${object.kind}`];
  try {
    new Model(object).validate();
    return [];
  } catch (error) {
    return [(error as Error).message];
  }
}

interface AttributeType {
  baseName: string;
  type: string;
}

const clientModelClasses = clientModels as unknown as Record<string, { getAttributeTypeMap?: () => AttributeType[] } | undefined>;

/** The client's model name of a kind: `apps/v1` Deployment → V1Deployment. */
function clientModelName(object: KubernetesObject): string {
  const version = object.apiVersion.split('/').at(-1)!;
  return `${version[0]!.toUpperCase()}${version.slice(1)}${object.kind}`;
}

/** The paths of fields the OpenAPI model of the object does not define. */
export function unknownFields(object: KubernetesObject): string[] {
  const type = clientModelName(object);
  if (clientModelClasses[type]?.getAttributeTypeMap === undefined) return [`no model ${type}`];
  return unknownFieldsOf(object, type, '');
}

function unknownFieldsOf(value: unknown, type: string, at: string): string[] {
  if (value === null || value === undefined) return [];
  const arrayOf = /^Array<(.+)>$/.exec(type)?.[1];
  if (arrayOf !== undefined) return (value as unknown[]).flatMap((item, index) => unknownFieldsOf(item, arrayOf, `${at}[${index}]`));
  const mapOf = /^\{ \[key: string\]: (.+); \}$/.exec(type)?.[1];
  if (mapOf !== undefined) {
    return Object.entries(value as object).flatMap(([key, item]) => unknownFieldsOf(item, mapOf, `${at}.${key}`));
  }
  const attributes = clientModelClasses[type]?.getAttributeTypeMap?.();
  // Scalars, IntOrString and free-form objects have no fields to check.
  if (attributes === undefined) return [];
  const fieldTypes = new Map(attributes.map((attribute) => [attribute.baseName, attribute.type]));
  return Object.entries(value as object).flatMap(([key, item]) => {
    const fieldType = fieldTypes.get(key);
    return fieldType === undefined ? [`${at}.${key}`] : unknownFieldsOf(item, fieldType, `${at}.${key}`);
  });
}
