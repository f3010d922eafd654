/**
 * Tokens as each identity provider issues them, over HTTP through a gateway that builds its
 * verifier from its configuration (AUTH_CLAIMS set to the provider's preset, AUTH_ISSUER and
 * AUTH_AUDIENCE to the provider's kind): a token shaped as the provider documents it is let in
 * with its scopes (a read and a write it grants, a 403 for the one it does not) and its subject
 * owns what it creates; the same token with its scope claim in the other form, or without its
 * audience, is a 401 naming the claim.
 */
import { randomUUID } from 'node:crypto';
import { CLAIM_PRESET_NAMES } from '../../gateway/src/auth/claims.js';
import { signedClaims } from '../support/auth.js';
import { client, expectProblem } from '../support/http.js';
import { otherForms, PROVIDER_SHAPES, withoutAudience } from '../support/provider-tokens.js';
import { startGateway, startStack, type RunningGateway } from '../support/stack.js';

let stack: Awaited<ReturnType<typeof startStack>>;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.close());

const run = randomUUID().slice(0, 8);
const SCOPES = ['users:read', 'users:write', 'products:read'];

describe.each(CLAIM_PRESET_NAMES)('a gateway with AUTH_CLAIMS=%s', (preset) => {
  const shape = PROVIDER_SHAPES[preset];
  const subject = `${preset}-${run}`;
  let gateway: RunningGateway;
  beforeAll(async () => {
    gateway = await startGateway({ upstreams: stack.urls, guard: { authSettings: { AUTH_CLAIMS: preset, AUTH_ISSUER: shape.issuer, AUTH_AUDIENCE: shape.audience } } });
  });
  afterAll(() => gateway.close());

  const refusal = async (claims: Parameters<typeof signedClaims>[0]) => {
    const response = await client(gateway.url, { token: await signedClaims(claims) }).get('/api/users');
    expectProblem(response, 401, 'unauthorized');
    expect(response.headers.get('www-authenticate')).toContain('error="invalid_token"');
    return response.body.detail as string;
  };

  it("lets the provider's token in with its scopes, and its subject owns what it creates", async () => {
    const api = client(gateway.url, { token: await signedClaims(shape.claims(subject, SCOPES)) });
    const created = await api.post('/api/users', { email: `${subject}@example.com`, name: 'Claims Test' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ owner: subject });
    expect((await api.get(created.headers.get('location')!)).status).toBe(200);
    expect((await api.get('/api/products')).status).toBe(200);
    const refused = await api.post('/api/products', { sku: `CLAIMS-${subject}`, name: 'Not granted', price: { amount: '1.00', currency: 'EUR' } });
    expectProblem(refused, 403, 'insufficient-scope');
  });

  it('refuses it with its scope claim in the other form, naming the claim', async () => {
    for (const { claim, claims } of otherForms(preset, shape.claims(subject, SCOPES))) {
      expect(await refusal(claims)).toMatch(new RegExp(`^The access token's ${claim} claim must be `));
    }
  });

  it('refuses it without its audience, naming the claim', async () => {
    const { claim, claims } = withoutAudience(preset, shape.claims(subject, SCOPES));
    expect(await refusal(claims)).toBe(`The access token has no ${claim} claim`);
  });
});
