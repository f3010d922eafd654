/**
 * A problem type a module adds (a gateway feature's, from its folder): an HttpProblem of it, and the
 * API description listing it, even when the description's schemas were made before it was added.
 */
import { apiDocument, describe as describeEndpoints, probeEndpoints, problemResponse, problemTypesTable } from '../src/api-description/openapi.js';
import { addProblemType, HttpProblem } from '../src/platform/problem.js';

declare module '../src/platform/problem.js' {
  interface AddedProblemTypes {
    'maintenance': true;
  }
}

test('an added problem type is a problem like the built-in ones, and the description lists it', () => {
  // Made first, as the probes' description is when the module loads.
  const before = problemResponse(503);
  const kind = addProblemType('maintenance', { status: 503, title: 'Down for maintenance' });
  expect(new HttpProblem(kind, 'Back at noon').toJSON('/api/users')).toMatchObject({ type: 'https://problems.example/maintenance', title: 'Down for maintenance', status: 503 });
  expect(problemTypesTable()).toContain('| `https://problems.example/maintenance` | 503 | Down for maintenance |');
  const paths = describeEndpoints([...probeEndpoints, { path: '/quota', tag: probeEndpoints[0]!.tag, operations: { GET: { operationId: 'getQuota', summary: 'Quota', responses: { 503: before } } } }]);
  const { components } = apiDocument({ title: 'Quota', version: '1' }, paths, []);
  const schemas = components?.schemas as Record<string, { enum?: string[]; allOf?: { properties?: Record<string, { enum?: string[] }> }[]; description?: string }>;
  expect(schemas.ProblemType?.enum).toContain('https://problems.example/maintenance');
  // Within a status, the added types come first: a gateway feature refuses before a service can.
  const byStatus = schemas.Problem503!.allOf!.find(({ properties }) => properties?.type)!.properties!;
  expect(byStatus.type!.enum).toEqual(['https://problems.example/maintenance', 'https://problems.example/service-unavailable']);
  expect(byStatus.title!.enum).toEqual(['Down for maintenance', 'Service unavailable']);
  expect(schemas.Problem503!.description).toContain('`maintenance`');
  expect(addProblemType('maintenance', { status: 503, title: 'Down for maintenance' })).toBe('maintenance');
  expect(() => addProblemType('maintenance', { status: 503, title: 'Again' })).toThrow('defined twice');
});
