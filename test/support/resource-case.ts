import { readServiceList } from '@app/shared/platform/services';
import type { FilterSet } from '@app/shared/resource/filters';

/**
 * What the per-resource suites (api-conventions, hostile-input) need to know about a resource
 * beyond openapi.json: bodies that pass and fail its rules. Each service keeps its own in
 * `<service>/test/api-case.ts` (exporting `apiCase`), so a new service brings its own.
 */
export interface ResourceCase {
  /** A valid new resource; `n` makes unique fields unique. */
  valid(n: number): Record<string, unknown>;
  /** The fields the service returns for a valid body (defaults filled in, values normalised). */
  echoed(body: Record<string, unknown>): Record<string, unknown>;
  invalid: { body: Record<string, unknown>; paths: string[] };
  /** A field the resource cannot do without: a patch that removes it is refused. */
  required: string;
  patch: { body: Record<string, unknown>; expected: Record<string, unknown> };
  /**
   * The resource's list filters (its definition's `filter`): the shared suites list by each. Two
   * bodies `valid(n)` and `valid(n + 1)` must differ in every filtered field.
   */
  filters: FilterSet;
  /** The resource's unique field, if it has one, and a clash with it. */
  unique?: {
    field: string;
    /** A different resource whose unique field collides with `body`'s. */
    duplicateOf(body: Record<string, unknown>, n: number): Record<string, unknown>;
  };
}

/** Every service in services.json with its case: `name` as in the list, `path` its collection. */
export async function resourceCases(): Promise<(ResourceCase & { name: string; path: string })[]> {
  const cases: (ResourceCase & { name: string; path: string })[] = [];
  // One import at a time: jest's module loader can fail imports made concurrently.
  for (const { name, prefix, workspace } of readServiceList()) {
    const { apiCase } = (await import(`../../${workspace}/test/api-case.js`)) as { apiCase: ResourceCase };
    cases.push({ ...apiCase, name, path: prefix });
  }
  return cases;
}
