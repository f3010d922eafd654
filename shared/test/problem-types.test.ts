/**
 * A problem type a module adds (a gateway feature's, from its folder): an HttpProblem of it, and the
 * API description listing it, even when the description's schemas were made before it was added.
 */
import { apiDocument, describe as describeEndpoints, probeEndpoints, problemResponse, problemTypesTable } from '../src/api-description/openapi.js';
import { addProblemType, HttpProblem } from '../src/platform/problem.js';

declare module '../src/platform/problem.js' {
  interface AddedProblemTypes {
    'quota-spent': true;
  }
}

test('an added problem type is a problem like the built-in ones, and the description lists it', () => {
  // Made first, as the probes' description is when the module loads.
  const before = problemResponse(429);
  const kind = addProblemType('quota-spent', { status: 429, title: 'Quota spent' });
  expect(new HttpProblem(kind, 'No more today').toJSON('/api/users')).toMatchObject({ type: 'https://problems.example/quota-spent', title: 'Quota spent', status: 429 });
  expect(problemTypesTable()).toContain('| `https://problems.example/quota-spent` | 429 | Quota spent |');
  const paths = describeEndpoints([...probeEndpoints, { path: '/quota', tag: probeEndpoints[0]!.tag, operations: { GET: { operationId: 'getQuota', summary: 'Quota', responses: { 429: problemResponse(429), 503: before } } } }]);
  const { components } = apiDocument({ title: 'Quota', version: '1' }, paths, []);
  const schemas = components?.schemas as Record<string, { enum?: string[]; allOf?: { properties?: Record<string, { enum?: string[] }> }[]; description?: string }>;
  expect(schemas.ProblemType?.enum).toContain('https://problems.example/quota-spent');
  const byStatus = schemas.Problem429!.allOf!.find(({ properties }) => properties?.type)!.properties!;
  expect(byStatus.type!.enum).toEqual(['https://problems.example/rate-limited', 'https://problems.example/quota-spent']);
  expect(byStatus.title!.enum).toEqual(['Too many requests', 'Quota spent']);
  expect(schemas.Problem429!.description).toContain('`quota-spent`');
  expect(() => addProblemType('quota-spent', { status: 429, title: 'Again' })).toThrow('defined twice');
});
