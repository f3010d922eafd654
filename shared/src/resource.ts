import { v7 as uuidv7 } from 'uuid';
import { z } from 'zod';
import { HttpProblem, problems } from './problem.js';
import { mergePatch, parseOrThrow } from './validation.js';

/**
 * The rules every resource of this API shares: ids, versions and ETags, full replacement, merge
 * patch, optimistic concurrency and keyset pages. A service supplies the schema of its writable
 * fields and a store (its SQL); this module decides everything else.
 */

export interface Stored<F> {
  id: string;
  version: number;
  createdAt: Date;
  updatedAt: Date;
  fields: F;
}

export interface Page<F> {
  items: Stored<F>[];
  nextCursor: string | null;
}

/** What a service's data layer provides. Every write is decided by the database. */
export interface ResourceStore<F, Filter> {
  /** Up to `limit` rows with id > `afterId`, in id order. */
  list(query: { afterId: string | undefined; limit: number; filter: Filter }): Promise<Stored<F>[]>;
  find(id: string): Promise<Stored<F> | undefined>;
  /** Throws a 409 problem when a unique field is taken. */
  insert(resource: Stored<F>): Promise<void>;
  /** Writes `resource` only if the stored version is still `expectedVersion`; false otherwise. */
  update(resource: Stored<F>, expectedVersion: number): Promise<boolean>;
  /** Deletes, only at `expectedVersion` when given; false when nothing matched. */
  delete(id: string, expectedVersion?: number): Promise<boolean>;
}

export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const READ_ONLY_FIELDS = ['id', 'createdAt', 'updatedAt'];
const MAX_UPDATE_ATTEMPTS = 5;

export const etagOf = (version: number) => `"${version}"`;

/**
 * A parsed `If-Match` / `If-None-Match`: `*` or the listed ETags. `weak` matching ignores a `W/`
 * prefix (If-None-Match); strong matching never matches a weak tag (If-Match).
 */
export function etagMatches(header: string | undefined, etag: string, comparison: 'strong' | 'weak'): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  return header.split(',').some((candidate) => {
    const tag = candidate.trim();
    if (tag.startsWith('W/')) return comparison === 'weak' && tag.slice(2) === etag;
    return tag === etag;
  });
}

/** The versions an `If-Match` header can match, or '*' for any. */
function versionsIn(header: string): number[] | '*' {
  if (header.trim() === '*') return '*';
  return header
    .split(',')
    .map((tag) => /^"(\d{1,10})"$/.exec(tag.trim())?.[1])
    .filter((version): version is string => version !== undefined)
    .map(Number);
}

export function encodeCursor(id: string): string {
  return Buffer.from(id, 'latin1').toString('base64url');
}

export const cursor = z
  .string()
  .meta({ description: 'The `nextCursor` of the previous page: an opaque token.' })
  .transform((value, context) => {
    const id = Buffer.from(value, 'base64url').toString('latin1');
    if (!UUID_V7.test(id) || encodeCursor(id) !== value) {
      context.addIssue({ code: 'custom', message: 'is not a cursor returned by this API' });
      return z.NEVER;
    }
    return id;
  });

export const DEFAULT_LIMIT = 50;

/** `?limit=` as the query string carries it. */
export const limit = z
  .string()
  .regex(/^\d{1,3}$/, 'must be a whole number from 1 to 200')
  .transform(Number)
  .pipe(z.int().min(1, 'must be a whole number from 1 to 200').max(200, 'must be a whole number from 1 to 200'))
  .meta({ description: `The page size, from 1 to 200; ${DEFAULT_LIMIT} when absent.` });

/** What a resource is, apart from where it is stored: the API description is generated from it too. */
export interface ResourceDefinition<F extends Record<string, unknown>> {
  /** Singular, lower case: `user`. */
  name: string;
  /** The writable fields: request bodies are validated with it, responses are shaped by its output. */
  fields: z.ZodType<F>;
  /** The list filters, one optional query parameter each. */
  filter: z.ZodRawShape;
  /** A valid request body: the API description's examples start from it. */
  example: Record<string, unknown>;
}

/** The query a list accepts: `limit`, `cursor` and the filters; anything else is a 400. */
export function listQuerySchema(filter: z.ZodRawShape) {
  return z.strictObject({ limit: limit.optional(), cursor: cursor.optional(), ...filter });
}

export class ResourceService<F extends Record<string, unknown>, Filter> {
  readonly #listQuery: z.ZodType<{ limit?: number; cursor?: string } & Filter>;
  readonly name: string;
  readonly fieldsSchema: z.ZodType<F>;

  constructor(
    readonly definition: ResourceDefinition<F>,
    readonly store: ResourceStore<F, Filter>,
  ) {
    this.name = definition.name;
    this.fieldsSchema = definition.fields;
    this.#listQuery = listQuerySchema(definition.filter) as never;
  }

  async list(query: unknown): Promise<Page<F>> {
    const { limit: size = DEFAULT_LIMIT, cursor: afterId, ...filter } = parseOrThrow(this.#listQuery, query);
    const rows = await this.store.list({ afterId, limit: size + 1, filter: filter as Filter });
    const items = rows.slice(0, size);
    const last = items.at(-1);
    return { items, nextCursor: rows.length > size && last ? encodeCursor(last.id) : null };
  }

  async get(id: string): Promise<Stored<F>> {
    const found = UUID_V7.test(id) ? await this.store.find(id) : undefined;
    if (!found) throw problems.notFound(`No ${this.name} with id ${id}`);
    return found;
  }

  async create(body: unknown): Promise<Stored<F>> {
    const now = new Date();
    const resource: Stored<F> = {
      id: uuidv7(),
      version: 1,
      createdAt: now,
      updatedAt: now,
      fields: this.#parseFields(body),
    };
    await this.store.insert(resource);
    return resource;
  }

  /** PUT: full replacement; never creates. */
  replace(id: string, body: unknown, ifMatch: string | undefined): Promise<Stored<F>> {
    const fields = this.#parseFields(body);
    return this.#update(id, ifMatch, () => fields);
  }

  /** PATCH: RFC 7396 merge patch of the writable fields, then the same rules as PUT. */
  patch(id: string, body: unknown, ifMatch: string | undefined): Promise<Stored<F>> {
    const patch = withoutReadOnly(parseOrThrow(z.record(z.string(), z.unknown()), body));
    return this.#update(id, ifMatch, (current) => this.#parseFields(mergePatch(current.fields, patch)));
  }

  async delete(id: string, ifMatch: string | undefined): Promise<void> {
    if (!UUID_V7.test(id)) throw problems.notFound(`No ${this.name} with id ${id}`);
    if (ifMatch === undefined) {
      if (!(await this.store.delete(id))) throw problems.notFound(`No ${this.name} with id ${id}`);
      return;
    }
    const versions = versionsIn(ifMatch);
    if (versions === '*') {
      if (!(await this.store.delete(id))) throw problems.notFound(`No ${this.name} with id ${id}`);
      return;
    }
    for (const version of versions) if (await this.store.delete(id, version)) return;
    await this.get(id); // 404 when it is gone
    throw problems.preconditionFailed();
  }

  /**
   * Optimistic concurrency: read, compute, then a conditional UPDATE on the version that was read.
   * When another writer won in between, If-Match no longer holds (412); without If-Match we retry.
   */
  async #update(id: string, ifMatch: string | undefined, nextFields: (current: Stored<F>) => F): Promise<Stored<F>> {
    for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
      const current = await this.get(id);
      if (ifMatch !== undefined && !etagMatches(ifMatch, etagOf(current.version), 'strong')) throw problems.preconditionFailed();
      const next: Stored<F> = {
        ...current,
        version: current.version + 1,
        updatedAt: new Date(Math.max(Date.now(), current.updatedAt.getTime())),
        fields: nextFields(current),
      };
      if (await this.store.update(next, current.version)) return next;
    }
    throw new HttpProblem('concurrent-update', `The ${this.name} changed ${MAX_UPDATE_ATTEMPTS} times while this request tried to update it; retry`);
  }

  #parseFields(body: unknown): F {
    return parseOrThrow(this.fieldsSchema, withoutReadOnly(parseOrThrow(z.record(z.string(), z.unknown()), body)));
  }
}

function withoutReadOnly(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([field]) => !READ_ONLY_FIELDS.includes(field)));
}

/** The JSON representation: id, the fields, then the timestamps. */
export function representation<F>(resource: Stored<F>): Record<string, unknown> {
  return {
    id: resource.id,
    ...resource.fields,
    createdAt: resource.createdAt.toISOString(),
    updatedAt: resource.updatedAt.toISOString(),
  };
}
