/**
 * Checks HTTP exchanges against the API description (openapi.json): is the status documented for
 * that path and method, are the documented headers there and well-formed, does the body have a
 * documented media type and match its schema. JSON Schema 2020-12 (OpenAPI 3.1's dialect) by Ajv's
 * 2020 validator, compiled against the document itself; the types are zod-openapi's OpenAPI 3.1 types.
 *
 * Why not a response validator library: openapi-response-validator reads OpenAPI 3.0 only;
 * openapi-backend's validateResponse checks only `application/json` bodies (not problem+json), with
 * a draft-07 Ajv, and its header check makes every described header required or none;
 * express-openapi-validator checks the responses of an express app it is mounted in, not exchanges
 * seen by a client or a proxy; @seriousme/openapi-schema-validator checks documents, not responses.
 * What is left here is the lookup of the described response and its headers around Ajv.
 *
 * What OpenAPI cannot state, the API conventions do, and this checks them too: a path that is not
 * described is a 404 problem; a method a described path does not have is a 405 problem whose
 * `Allow` lists exactly the described methods (OPTIONS aside).
 */
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { oas31 } from 'zod-openapi';

type Schema = oas31.SchemaObject;
type Reference = oas31.ReferenceObject;
type Header = oas31.HeaderObject;
type MediaType = oas31.MediaTypeObject;
type Parameter = oas31.ParameterObject;
type Response = oas31.ResponseObject;
/** The library's types, with what every operation of this document has (responses; bodies inline). */
export type Operation = oas31.OperationObject & { responses: Record<string, Response | Reference>; requestBody?: oas31.RequestBodyObject };
export type PathItem = Omit<oas31.PathItemObject, (typeof METHODS)[number]> & { [M in (typeof METHODS)[number]]?: Operation };
export type OpenApiDocument = oas31.OpenAPIObject & { paths: Record<string, PathItem>; components: oas31.ComponentsObject };

export const OPENAPI_FILE = new URL('../../openapi.json', import.meta.url);
const DOCUMENT_ID = 'https://contract.test/openapi.json';
const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const;
const ANY_PROBLEM: Record<string, MediaType> = { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } };

export interface Exchange {
  method: string;
  /** The request target: path and query. */
  url: string;
  status: number;
  headers: Headers;
  /** The response body as text. */
  text: string;
  request?: { headers: Headers; text: string };
}

const mediaTypeOf = (contentType: string | null) => contentType?.split(';', 1)[0]?.trim().toLowerCase();
const isJson = (mediaType: string) => mediaType === 'application/json' || mediaType.endsWith('+json');

/** A header or query value as its schema's type reads it. */
function coerce(value: string, schema: Schema | Reference = {}): unknown {
  if ('type' in schema && (schema.type === 'integer' || schema.type === 'number') && /^-?\d+(\.\d+)?$/.test(value)) return Number(value);
  return value;
}

export class Contract {
  readonly #ajv: Ajv2020;
  readonly #validators = new WeakMap<object, ValidateFunction>();
  readonly #templates: { template: string; pattern: RegExp }[];

  constructor(readonly document: OpenApiDocument) {
    this.#ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: true });
    addFormats.default(this.#ajv);
    this.#ajv.addSchema(document as object, DOCUMENT_ID);
    // Literal paths before templated ones: `/docs` is not `/docs/{file}`.
    this.#templates = Object.keys(document.paths)
      .sort((a, b) => Number(a.includes('{')) - Number(b.includes('{')))
      .map((template) => ({
        template,
        pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}/]+\}/g, '[^/]+')}$`),
      }));
  }

  /** `#/components/...` objects of the document (headers, parameters), followed through `$ref`. */
  resolve<T>(value: T | Reference): T {
    let current: unknown = value;
    for (let hops = 0; typeof current === 'object' && current !== null && '$ref' in current; hops++) {
      if (hops > 10) throw new Error('$ref loop');
      const pointer = (current as Reference).$ref.replace(/^#\//, '').split('/');
      current = pointer.reduce<unknown>((node, key) => (node as Record<string, unknown>)[key.replaceAll('~1', '/').replaceAll('~0', '~')], this.document);
    }
    return current as T;
  }

  /** Schema errors of `value`, as readable lines. */
  schemaErrors(schema: Schema | Reference = {}, value: unknown): string[] {
    let validate = this.#validators.get(schema);
    if (!validate) {
      // Compiled where the document's own `#/components/...` references resolve.
      const rebased = JSON.parse(JSON.stringify(schema), (key, ref: unknown) => (key === '$ref' && typeof ref === 'string' && ref.startsWith('#') ? DOCUMENT_ID + ref : ref));
      validate = this.#ajv.compile(rebased);
      this.#validators.set(schema, validate);
    }
    if (validate(value)) return [];
    return (validate.errors ?? []).map((error) => `${error.instancePath ? `${error.instancePath} ` : ''}${error.message ?? 'is invalid'}${error.params && 'allowedValues' in error.params ? ` (${JSON.stringify(error.params.allowedValues)})` : ''}`);
  }

  /** The described path that `pathname` falls under. */
  pathOf(pathname: string): { template: string; item: PathItem } | undefined {
    const match = this.#templates.find(({ pattern }) => pattern.test(pathname));
    return match && { template: match.template, item: this.document.paths[match.template]! };
  }

  /** Every way `exchange` departs from the description; none when it conforms. */
  violations(exchange: Exchange): string[] {
    const url = new URL(exchange.url, 'http://host');
    const method = exchange.method.toLowerCase();
    const found = this.pathOf(url.pathname);
    if (!found) return this.#undescribed(exchange, 404, 'a path that is not described');
    const operation = found.item[method as (typeof METHODS)[number]];
    if (!operation) {
      const violations = this.#undescribed(exchange, 405, `${exchange.method} on ${found.template}`);
      const described = METHODS.filter((m) => m !== 'options' && found.item[m]).map((m) => m.toUpperCase());
      const allow = exchange.headers.get('allow')?.split(',').map((m) => m.trim()) ?? [];
      if (exchange.status === 405 && [...allow].sort().join() !== [...described].sort().join()) {
        violations.push(`Allow is "${allow.join(', ')}"; the described methods are ${described.join(', ')}`);
      }
      return violations;
    }
    return [
      ...(exchange.request ? this.#requestViolations(exchange, url, found.item, operation) : []),
      ...this.#responseViolations(exchange, method, found.template, operation),
    ];
  }

  /** What the conventions require where the description has nothing: a problem of `status`. */
  #undescribed(exchange: Exchange, status: number, what: string): string[] {
    if (exchange.status !== status) return [`${what} must be answered ${status}, not ${exchange.status}`];
    if (exchange.method.toUpperCase() === 'HEAD') return [];
    return this.#body(exchange, ANY_PROBLEM).concat(
      this.#parsed(exchange)?.status === status ? [] : [`the problem's status is not ${status}`],
    );
  }

  #parsed(exchange: Exchange): Record<string, unknown> | undefined {
    try {
      return JSON.parse(exchange.text) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  }

  #responseViolations(exchange: Exchange, method: string, template: string, operation: Operation): string[] {
    const status = String(exchange.status);
    const described = operation.responses[status] ?? operation.responses[`${status[0]}XX`] ?? operation.responses.default;
    if (!described) return [`${status} is not a described response of ${method.toUpperCase()} ${template} (${Object.keys(operation.responses).join(', ')})`];
    const response = this.resolve<Response>(described);
    const violations: string[] = [];
    for (const [name, reference] of Object.entries(response.headers ?? {})) {
      const header = this.resolve<Header>(reference);
      const value = exchange.headers.get(name);
      if (value === null) {
        if (header.required) violations.push(`header ${name} is missing`);
      } else {
        violations.push(...this.schemaErrors(header.schema, coerce(value, header.schema)).map((error) => `header ${name}: "${value}" ${error}`));
      }
    }
    if (!response.content || method === 'head') {
      if (exchange.text !== '') violations.push(`a ${status} ${method === 'head' ? 'to HEAD' : 'without described content'} must have no body`);
      return violations;
    }
    return violations.concat(this.#body(exchange, response.content));
  }

  #body(exchange: Exchange, content: Record<string, MediaType>): string[] {
    const mediaType = mediaTypeOf(exchange.headers.get('content-type'));
    const described = mediaType === undefined ? undefined : content[mediaType];
    if (!mediaType || !described) return [`Content-Type ${mediaType ?? '(none)'} is not one of ${Object.keys(content).join(', ')}`];
    if (!isJson(mediaType)) return [];
    let body: unknown;
    try {
      body = JSON.parse(exchange.text);
    } catch {
      return [`the ${mediaType} body is not JSON`];
    }
    return this.schemaErrors(described.schema, body).map((error) => `body ${error}`);
  }

  #requestViolations(exchange: Exchange, url: URL, item: PathItem, operation: Operation): string[] {
    const request = exchange.request!;
    const violations: string[] = [];
    const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])].map((p) => this.resolve<Parameter>(p));
    for (const parameter of parameters) {
      if (parameter.in === 'path') continue; // matched by the template; the operation answers unknown ids
      const value = parameter.in === 'query' ? url.searchParams.get(parameter.name) : request.headers.get(parameter.name);
      if (value === null) {
        if (parameter.required) violations.push(`request: ${parameter.in} parameter ${parameter.name} is missing`);
        continue;
      }
      violations.push(...this.schemaErrors(parameter.schema, coerce(value, parameter.schema)).map((error) => `request: ${parameter.in} parameter ${parameter.name} ${error}`));
    }
    for (const name of new Set(url.searchParams.keys())) {
      if (!parameters.some((p) => p.in === 'query' && p.name === name)) violations.push(`request: query parameter ${name} is not described`);
    }
    if (!operation.requestBody) {
      if (request.text !== '') violations.push('request: a body where none is described');
      return violations;
    }
    const mediaType = mediaTypeOf(request.headers.get('content-type'));
    const described = mediaType === undefined ? undefined : operation.requestBody.content[mediaType];
    if (!mediaType || !described) return [...violations, `request: Content-Type ${mediaType ?? '(none)'} is not one of ${Object.keys(operation.requestBody.content).join(', ')}`];
    try {
      violations.push(...this.schemaErrors(described.schema, JSON.parse(request.text)).map((error) => `request: body ${error}`));
    } catch {
      violations.push('request: the body is not JSON');
    }
    return violations;
  }
}

export class ContractViolation extends Error {
  constructor(exchange: Exchange, violations: string[]) {
    super(`${exchange.method} ${exchange.url} → ${exchange.status} departs from openapi.json:\n${violations.map((v) => `  - ${v}`).join('\n')}`);
    this.name = 'ContractViolation';
  }
}

let committed: Contract | undefined;

/** The contract of the committed openapi.json. */
export function apiContract(): Contract {
  committed ??= new Contract(JSON.parse(readFileSync(OPENAPI_FILE, 'utf8')) as OpenApiDocument);
  return committed;
}

/** Throws a ContractViolation when `exchange` departs from the contract. */
export function assertConforms(exchange: Exchange, contract = apiContract()): void {
  const violations = contract.violations(exchange);
  if (violations.length > 0) throw new ContractViolation(exchange, violations);
}
