/**
 * The production path of identity, against a real OpenID provider (scripts/idp.ts: oidc-provider,
 * OpenID Certified): a client gets its token over HTTP as a provider's docs show (the discovery
 * document's token endpoint, client_secret_basic, grant_type=client_credentials, scope and a
 * resource indicator), and the gateway, configured only by its settings (AUTH_JWKS_URL,
 * AUTH_ISSUER, AUTH_AUDIENCE), checks it against the provider's published keys: reads and writes
 * pass, records are owned by the token's `sub` (the client's id), a token without the write scope
 * is a 403 on a write and a token for another API a 401.
 */
import { IDP_AUDIENCE, IDP_CLIENTS, startIdp, type RunningIdp } from '../../scripts/idp.js';
import { client, expectProblem, type Client } from '../support/http.js';
import { clientCredentialsToken } from '../support/idp-client.js';
import { startStack } from '../support/stack.js';

const ANOTHER_API = 'urn:example:another-api';
const [clientA, clientB] = IDP_CLIENTS;

let idp: RunningIdp;
let stack: Awaited<ReturnType<typeof startStack>>;
let tokenEndpoint: string;

beforeAll(async () => {
  idp = await startIdp({ audiences: [IDP_AUDIENCE, ANOTHER_API] });
  const discovery = (await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json()) as { issuer: string; token_endpoint: string; jwks_uri: string };
  tokenEndpoint = discovery.token_endpoint;
  stack = await startStack({ guard: { authSettings: { AUTH_JWKS_URL: discovery.jwks_uri, AUTH_ISSUER: discovery.issuer, AUTH_AUDIENCE: IDP_AUDIENCE } } });
});
afterAll(async () => {
  await stack?.close();
  await idp?.close();
});

const tokenFor = (who: { id: string; secret: string }, scope: string, resource?: string) => clientCredentialsToken(tokenEndpoint, who, scope, resource);

const apiAs = async (who: { id: string; secret: string }, scope: string, resource?: string): Promise<Client> => client(stack.gateway.url, { token: await tokenFor(who, scope, resource) });
const newUser = () => ({ email: `idp-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com`, name: 'From the provider' });

it('a client gets a token from the provider and reads and writes through the gateway: GET, POST, PATCH', async () => {
  const api = await apiAs(clientA, 'users:read users:write products:read products:write');
  const created = await api.post('/api/users', newUser());
  expect(created.status).toBe(201);
  const path = created.headers.get('location')!;
  const patched = await api.patch(path, { name: 'Renamed' });
  expect([patched.status, patched.body?.name]).toEqual([200, 'Renamed']);
  const read = await api.get(path);
  expect([read.status, read.body?.name]).toEqual([200, 'Renamed']);
  expect((await api.get('/api/products')).status).toBe(200);
});

it("records are owned by the token's sub, the client's id: client A's user is a 404 to client B and not in its list", async () => {
  const scopes = 'users:read users:write';
  const [asA, asB] = await Promise.all([apiAs(clientA, scopes), apiAs(clientB, scopes)]);
  const path = (await asA.post('/api/users', newUser())).headers.get('location')!;
  expect((await asA.get(path)).status).toBe(200);
  expectProblem(await asB.get(path), 404);
  expectProblem(await asB.patch(path, { name: 'Taken' }), 404);
  const listed = await asB.get('/api/users?limit=100');
  expect(listed.body.items.map(({ id }: { id: string }) => id)).not.toContain(path.split('/').at(-1));
  expect((await asA.get(path)).body.name).toBe('From the provider');
});

it('a token without the write scope is a 403 insufficient-scope on a write, and still reads', async () => {
  const readOnly = await apiAs(clientA, 'users:read');
  expectProblem(await readOnly.post('/api/users', newUser()), 403, 'insufficient-scope');
  expect((await readOnly.get('/api/users')).status).toBe(200);
});

it("a token the provider issued for another API is a 401 naming the audience", async () => {
  const elsewhere = await apiAs(clientA, 'users:read', ANOTHER_API);
  const refused = await elsewhere.get('/api/users');
  expect(expectProblem(refused, 401, 'unauthorized').detail).toBe("The access token's aud claim is not accepted here");
  expect(refused.headers.get('www-authenticate')).toContain('error="invalid_token"');
});
