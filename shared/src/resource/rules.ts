import { v7 as uuidv7 } from 'uuid';
import { z } from 'zod';
import { HttpProblem, problems } from '../platform/problem.js';
import { UUID_V7 } from '../platform/request-target.js';
import { mergePatch, parseOrThrow } from '../platform/validation.js';
import { valueAt, type FilterSet } from './filters.js';
import { UNRESTRICTED, type Access } from './ownership.js';

/**
 * The rules every resource of this API shares: ids, versions and ETags, full replacement, merge
 * patch, optimistic concurrency and keyset pages. A service supplies the schema of its writable
 * fields and a store (its SQL); this module decides everything else.
 */

export interface Stored<F> {
  id: string;
  /** The verified subject that created it; null when none did (authentication off, or a row older than owners). */
  owner: string | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
  fields: F;
}

export interface Page<F> {
  items: Stored<F>[];
  nextCursor: string | null;
  /**
   * False when the query's cursor names no record the caller sees: still answered (a record deleted
   * between two pages must not end a walk), but kept by no cache, or each made-up cursor would be an entry.
   */
  storable: boolean;
}

/** What a service's data layer provides. Every write is decided by the database. */
export interface ResourceStore<F, Filter> {
  /** Up to `limit` rows with id > `afterId` (and of `owner`, when given), in id order. */
  list(query: { afterId: string | undefined; limit: number; filter: Filter; owner?: string }): Promise<Stored<F>[]>;
  /** The row `id`, when it exists (and is `owner`'s, when given). */
  find(id: string, owner?: string): Promise<Stored<F> | undefined>;
  /** Throws a 409 problem when a unique field is taken. */
  insert(resource: Stored<F>): Promise<void>;
  /** Writes `resource` only if the stored version is still `expectedVersion`; false otherwise. */
  update(resource: Stored<F>, expectedVersion: number): Promise<boolean>;
  /** Deletes, only at `expectedVersion` when given; false when nothing matched. */
  delete(id: string, expectedVersion?: number): Promise<boolean>;
}

const READ_ONLY_FIELDS = ['id', 'owner', 'createdAt', 'updatedAt'];
const MAX_UPDATE_ATTEMPTS = 5;

export const etagOf = (version: number) => `"${version}"`;

/** `If-Match` and `If-None-Match` as a request sent them (absent: undefined). */
export interface Conditions {
  ifMatch?: string;
  ifNoneMatch?: string;
}

export const conditionsOf = (headers: { 'if-match'?: string; 'if-none-match'?: string }): Conditions => ({
  ifMatch: headers['if-match'],
  ifNoneMatch: headers['if-none-match'],
});

// RFC 9110 §8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / obs-text.
const ENTITY_TAG = String.raw`(?:W\/)?"[\x21\x23-\x7e\x80-\xff]*"`;
const ENTITY_TAG_LIST = new RegExp(String.raw`^[ \t]*(?:${ENTITY_TAG}[ \t]*)?(?:,[ \t]*(?:${ENTITY_TAG}[ \t]*)?)*$`);

/**
 * An `If-Match` / `If-None-Match` value (RFC 9110 §13.1.1-2): `*`, or the entity tags of the list
 * (empty list elements allowed, as for any #list); undefined when it is neither.
 */
export function parseEntityTags(header: string): '*' | { weak: boolean; tag: string }[] | undefined {
  if (header.trim() === '*') return '*';
  if (!ENTITY_TAG_LIST.test(header)) return undefined;
  return [...header.matchAll(new RegExp(ENTITY_TAG, 'g'))].map(([tag]) =>
    tag.startsWith('W/') ? { weak: true, tag: tag.slice(2) } : { weak: false, tag },
  );
}

/**
 * Whether `header` matches `etag` (RFC 9110 §8.8.3.2): `weak` comparison ignores a `W/` prefix
 * (If-None-Match); `strong` never matches a weak tag (If-Match). `*` matches any current
 * representation; a malformed header matches nothing.
 */
export function etagMatches(header: string | undefined, etag: string, comparison: 'strong' | 'weak'): boolean {
  const tags = header === undefined ? undefined : parseEntityTags(header);
  if (tags === undefined) return false;
  if (tags === '*') return true;
  return tags.some(({ weak, tag }) => tag === etag && (comparison === 'weak' || !weak));
}

const malformed = (header: string) =>
  problems.validation([{ path: header, message: 'must be * or a list of entity tags ("…" or W/"…")' }]);

/**
 * RFC 9110 §13.2.2 for a request on a resource that exists: its current ETag is `etag` (undefined
 * for one without a validator: a collection). If-Match first (strong comparison; false → 412),
 * otherwise If-None-Match (weak comparison; true → 304 for `read`, 412 for a write). Returns
 * 'not-modified' when a read should answer 304. A malformed If-Match is a 400; a malformed
 * If-None-Match is a 400 on a write and ignored on a read (as a cache that cannot parse it would).
 */
export function evaluatePreconditions(conditions: Conditions, etag: string | undefined, kind: 'read' | 'write'): 'proceed' | 'not-modified' {
  const { ifMatch, ifNoneMatch } = conditions;
  if (ifMatch !== undefined) {
    const tags = parseEntityTags(ifMatch);
    if (tags === undefined) throw malformed('If-Match');
    if (tags !== '*' && (etag === undefined || !etagMatches(ifMatch, etag, 'strong'))) throw problems.preconditionFailed();
    return 'proceed';
  }
  if (ifNoneMatch === undefined) return 'proceed';
  const tags = parseEntityTags(ifNoneMatch);
  if (tags === undefined) {
    if (kind === 'write') throw malformed('If-None-Match');
    return 'proceed';
  }
  const matches = tags === '*' || (etag !== undefined && etagMatches(ifNoneMatch, etag, 'weak'));
  if (!matches) return 'proceed';
  if (kind === 'read') return 'not-modified';
  throw problems.preconditionFailed(
    tags === '*' ? 'If-None-Match: * forbids changing a resource that exists' : 'If-None-Match matches the current ETag of the resource',
  );
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

/** A page's size without `?limit=`, and the largest `?limit=` may ask for. */
export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;
const LIMIT_RANGE = `must be a whole number from 1 to ${MAX_LIMIT}`;

/** `?limit=` as the query string carries it (as many digits as MAX_LIMIT has, at most). */
export const limit = z
  .string()
  .regex(/^\d{1,3}$/, LIMIT_RANGE)
  .transform(Number)
  .pipe(z.int().min(1, LIMIT_RANGE).max(MAX_LIMIT, LIMIT_RANGE))
  .meta({
    description: `The page size, from 1 to ${MAX_LIMIT}; ${DEFAULT_LIMIT} when absent.`,
    // Described as what it parses to, so a generated client sends a number.
    override: ({ jsonSchema }) => {
      Object.assign(jsonSchema, { type: 'integer', minimum: 1, maximum: MAX_LIMIT });
      delete jsonSchema.pattern;
    },
  });

/** What a resource is, apart from where it is stored: the API description is generated from it too. */
export interface ResourceDefinition<F extends Record<string, unknown>, Filters extends FilterSet = FilterSet> {
  /** Singular, lower case: `user`. */
  name: string;
  /**
   * The writable fields: request bodies are validated with it, responses are shaped by its output,
   * and the table's columns are named and read from it (columns.ts).
   */
  fields: z.ZodType<F> & Pick<z.ZodObject, 'shape'>;
  /** The list filters by query parameter, from `filters` (filters.ts). */
  filter: Filters;
  /** A valid request body: the API description's examples start from it. */
  example: Record<string, unknown>;
}

/**
 * The query a list accepts: `limit`, `cursor` and the filters (each optional); anything else is a
 * 400. With `example`, each filter's example in the API description is the value of its field there.
 */
export function listQuerySchema(filter: FilterSet, example?: Record<string, unknown>) {
  const described = (field: string, schema: z.ZodType) => (example === undefined ? schema : schema.meta({ param: { example: valueAt(example, field) } }));
  const filterParameters = Object.fromEntries(Object.entries(filter).map(([parameter, { field, schema }]) => [parameter, described(field, schema.optional())]));
  return z.strictObject({ limit: limit.optional(), cursor: cursor.optional(), ...filterParameters });
}

export class ResourceService<F extends Record<string, unknown>, Filter> {
  readonly name: string;
  readonly fieldsSchema: z.ZodType<F>;

  constructor(
    readonly definition: ResourceDefinition<F>,
    readonly store: ResourceStore<F, Filter>,
  ) {
    this.name = definition.name;
    this.fieldsSchema = definition.fields;
  }

  /**
   * A page, for a query that `listQuerySchema` parsed (the route declares it, so the router
   * validates it): of the records `access` sees, of `owner` when the query names one; storable
   * unless its cursor names a record `access` does not see.
   */
  async list(query: { limit?: number; cursor?: string; owner?: string } & Filter, access: Access = UNRESTRICTED): Promise<Page<F>> {
    const { limit: size = DEFAULT_LIMIT, cursor: afterId, owner: named, ...filter } = query;
    const asksForAnother = access.readsOf !== undefined && named !== undefined && named !== access.readsOf;
    // The cursor's record is looked up as an item read is, with the caller's access: it tells no more than one.
    const [rows, cursorRecord] = await Promise.all([
      asksForAnother ? [] : this.store.list({ afterId, limit: size + 1, filter: filter as Filter, owner: access.readsOf ?? named }),
      afterId === undefined ? undefined : this.store.find(afterId, access.readsOf),
    ]);
    const items = rows.slice(0, size);
    const last = items.at(-1);
    return { items, nextCursor: rows.length > size && last ? encodeCursor(last.id) : null, storable: afterId === undefined || cursorRecord !== undefined };
  }

  /** The record `id`, when `access` sees it: one it may not see is as absent as one that does not exist. */
  async get(id: string, access: Access = UNRESTRICTED): Promise<Stored<F>> {
    const found = UUID_V7.test(id) ? await this.store.find(id, access.readsOf) : undefined;
    if (!found) throw problems.notFound(`No ${this.name} with id ${id}`);
    return found;
  }

  /** A new record, owned by the caller, or by `owner` when an admin names one. */
  async create(body: unknown, access: Access = UNRESTRICTED, owner?: string): Promise<Stored<F>> {
    if (owner !== undefined && owner !== access.subject && !access.admin) {
      throw new HttpProblem('not-owner', `Only an admin may create a ${this.name} for another owner`);
    }
    const now = new Date();
    const resource: Stored<F> = {
      id: uuidv7(),
      owner: owner ?? access.subject ?? null,
      version: 1,
      createdAt: now,
      updatedAt: now,
      fields: this.#parseFields(body),
    };
    await this.store.insert(resource);
    return resource;
  }

  /** PUT: full replacement; never creates. */
  replace(id: string, body: unknown, conditions: Conditions = {}, access: Access = UNRESTRICTED): Promise<Stored<F>> {
    const fields = this.#parseFields(body);
    return this.#update(id, conditions, access, () => fields);
  }

  /** PATCH: RFC 7396 merge patch of the writable fields, then the same rules as PUT. */
  patch(id: string, body: unknown, conditions: Conditions = {}, access: Access = UNRESTRICTED): Promise<Stored<F>> {
    const patch = withoutReadOnly(parseOrThrow(z.record(z.string(), z.unknown()), body));
    return this.#update(id, conditions, access, (current) => this.#parseFields(mergePatch(current.fields, patch)));
  }

  async delete(id: string, conditions: Conditions = {}, access: Access = UNRESTRICTED): Promise<void> {
    if (!UUID_V7.test(id)) throw problems.notFound(`No ${this.name} with id ${id}`);
    if (conditions.ifMatch === undefined && conditions.ifNoneMatch === undefined && access.writesOf === undefined) {
      if (!(await this.store.delete(id))) throw problems.notFound(`No ${this.name} with id ${id}`);
      return;
    }
    // Decided on the version read (its preconditions, its owner), and deleted only at that version.
    for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
      const current = this.#changeable(await this.get(id, access), access);
      evaluatePreconditions(conditions, etagOf(current.version), 'write');
      if (await this.store.delete(id, current.version)) return;
    }
    throw this.#concurrentUpdate();
  }

  /** `current`, when `access` may change it: a record of another owner is a 403 (it may see it, not change it). */
  #changeable(current: Stored<F>, access: Access): Stored<F> {
    if (access.writesOf !== undefined && current.owner !== access.writesOf) {
      throw new HttpProblem('not-owner', `This ${this.name} belongs to another caller: only its owner (or an admin) may change it`);
    }
    return current;
  }

  /**
   * Optimistic concurrency: read, compute, then a conditional UPDATE on the version that was read.
   * The preconditions are evaluated on the version read; when another writer won in between, we
   * read again and evaluate them again (an If-Match that held then no longer does: 412).
   */
  async #update(id: string, conditions: Conditions, access: Access, nextFields: (current: Stored<F>) => F): Promise<Stored<F>> {
    for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
      const current = this.#changeable(await this.get(id, access), access);
      evaluatePreconditions(conditions, etagOf(current.version), 'write');
      const next: Stored<F> = {
        ...current,
        version: current.version + 1,
        updatedAt: new Date(Math.max(Date.now(), current.updatedAt.getTime())),
        fields: nextFields(current),
      };
      if (await this.store.update(next, current.version)) return next;
    }
    throw this.#concurrentUpdate();
  }

  #concurrentUpdate(): HttpProblem {
    return new HttpProblem('concurrent-update', `The ${this.name} changed ${MAX_UPDATE_ATTEMPTS} times while this request tried to change it; retry`);
  }

  #parseFields(body: unknown): F {
    return parseOrThrow(this.fieldsSchema, withoutReadOnly(parseOrThrow(z.record(z.string(), z.unknown()), body)));
  }
}

function withoutReadOnly(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([field]) => !READ_ONLY_FIELDS.includes(field)));
}

/**
 * The JSON representation: id, the fields, its owner (`withOwner`: where ownership decides who sees
 * or changes it; a catalogue does not show who created its entries), then the timestamps.
 */
export function representation<F>(resource: Stored<F>, withOwner = false): Record<string, unknown> {
  return {
    id: resource.id,
    ...resource.fields,
    ...(withOwner && { owner: resource.owner }),
    createdAt: resource.createdAt.toISOString(),
    updatedAt: resource.updatedAt.toISOString(),
  };
}
