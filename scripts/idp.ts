/**
 * `npm run idp`: a development OpenID provider (oidc-provider, which is OpenID Certified), so that
 * the gateway can be tried and tested against the production path: JWT access tokens by the
 * client-credentials grant, for a resource indicator that names the API, signed with keys the
 * provider publishes at its jwks_uri. Its clients and keys live in memory; it is for development
 * and tests only (docs/deploy.md, "A real OpenID provider").
 *
 * `startIdp()` runs it in process (the tests); run as a script it listens until Ctrl-C.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import type { JWK } from 'jose';
import Provider, { errors } from 'oidc-provider';
// The sources, run as they are: the provider needs no build.
import { GATEWAY_ADMIN_SCOPE, readServiceList } from '../shared/src/platform/services.ts';

/** The API's resource indicator (an absolute URI, RFC 8707), and so its tokens' `aud`: the gateway's AUTH_AUDIENCE. */
export const IDP_AUDIENCE = 'urn:rest-microservices:api';
export const IDP_DEFAULT_PORT = 9000;

/**
 * The development clients: two, so that ownership by the token's `sub` (the client's id) can be
 * seen. Their secrets are published here, like dev-keys/: a development provider only.
 */
export const IDP_CLIENTS = [
  { id: 'dev-client-a', secret: 'dev-secret-a' },
  { id: 'dev-client-b', secret: 'dev-secret-b' },
] as const;

/** Every scope of the API: each service's read, write and admin scopes (services.json), and gateway:admin. */
export const apiScopes = (): string[] => [...readServiceList().flatMap(({ scopes }) => [scopes.read, scopes.write, scopes.admin]), GATEWAY_ADMIN_SCOPE];

/** A private ES256 signing key as a JWK with a `kid` of its own. */
export type SigningKey = JWK & { kid: string };

export function generateSigningKey(): SigningKey {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'ES256', use: 'sig' } as SigningKey;
}

export interface IdpOptions {
  /** 0 (the default) lets the kernel pick one. */
  port?: number;
  host?: string;
  /** The `iss` of its tokens (default `http://<host>:<port>`): what a client behind another name (Compose's `idp`) reaches it at. */
  issuer?: string;
  /** The resource indicators it issues tokens for, each its tokens' `aud` (default: IDP_AUDIENCE). */
  audiences?: string[];
  /** The first signs, all are published (a rotation: [new, old], then [new]); default one generated now. */
  signingKeys?: SigningKey[];
  accessTokenTtlSeconds?: number;
}

export interface RunningIdp {
  issuer: string;
  jwksUri: string;
  tokenEndpoint: string;
  /** The key that signs its tokens. */
  signingKid: string;
  /** The HTTP server it answers on: a test observes the requests it gets (its 'request' event). */
  server: Server;
  close(): Promise<void>;
}

function providerFor(issuer: string, { audiences = [IDP_AUDIENCE], signingKeys, accessTokenTtlSeconds = 600 }: IdpOptions & { signingKeys: SigningKey[] }) {
  const scope = apiScopes().join(' ');
  return new Provider(issuer, {
    clients: IDP_CLIENTS.map(({ id, secret }) => ({ client_id: id, client_secret: secret, grant_types: ['client_credentials'], response_types: [], redirect_uris: [] })),
    jwks: { keys: signingKeys },
    ttl: { ClientCredentials: accessTokenTtlSeconds },
    // Its keys are ES256 only (the default, RS256, has none to sign with).
    clientDefaults: { id_token_signed_response_alg: 'ES256' },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A token is for one API, named by the client: no resource, no access token for the API.
        defaultResource: () => undefined,
        getResourceServerInfo: (_context, resource) => {
          if (!audiences.includes(resource)) throw new errors.InvalidTarget();
          return { scope, audience: resource, accessTokenTTL: accessTokenTtlSeconds, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'ES256', kid: signingKeys[0]!.kid } } };
        },
      },
    },
  });
}

function listening(server: ReturnType<typeof createServer>, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** The provider, listening; `close()` stops it and drops its connections. */
export async function startIdp(options: IdpOptions = {}): Promise<RunningIdp> {
  const host = options.host ?? '127.0.0.1';
  const signingKeys = options.signingKeys ?? [generateSigningKey()];
  if (signingKeys.length === 0) throw new Error('startIdp: signingKeys is empty: give at least the key that signs');
  // The issuer names the port, which is known once it listens.
  let handle: (request: IncomingMessage, response: ServerResponse) => void = (_request, response) => response.writeHead(503).end();
  const server = createServer((request, response) => handle(request, response));
  const port = await listening(server, options.port ?? 0, host);
  const issuer = options.issuer ?? `http://${host}:${port}`;
  handle = providerFor(issuer, { ...options, signingKeys }).callback();
  return {
    issuer,
    jwksUri: `${issuer}/jwks`,
    tokenEndpoint: `${issuer}/token`,
    signingKid: signingKeys[0]!.kid,
    server,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/** The curl that gets a token by client credentials, as a provider's docs show it. */
export const tokenCurl = (idp: { tokenEndpoint: string }, audience = IDP_AUDIENCE, scopes = 'users:read users:write products:read products:write') =>
  `curl -s -u ${IDP_CLIENTS[0].id}:${IDP_CLIENTS[0].secret} -d grant_type=client_credentials -d resource=${audience} -d scope='${scopes}' ${idp.tokenEndpoint}`;

const USAGE = `usage: npm run idp -- [--port ${IDP_DEFAULT_PORT}] [--issuer http://idp:${IDP_DEFAULT_PORT}] [--audience ${IDP_AUDIENCE}] [--keys signing-keys.json] [--ttl 600]
  --port      where it listens, on HOST (default 127.0.0.1)
  --issuer    the iss of its tokens (default http://HOST:PORT)
  --audience  the resource indicator of the API, its tokens' aud (default ${IDP_AUDIENCE})
  --keys      a JSON Web Key Set of private ES256 keys: the first signs, all are published (default: one generated at start)
  --ttl       seconds its access tokens live (default 600)
Clients (client_secret_basic): ${IDP_CLIENTS.map(({ id, secret }) => `${id}:${secret}`).join(', ')}`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      help: { type: 'boolean', short: 'h', default: false },
      port: { type: 'string', default: String(IDP_DEFAULT_PORT) },
      issuer: { type: 'string' },
      audience: { type: 'string', default: IDP_AUDIENCE },
      keys: { type: 'string' },
      ttl: { type: 'string', default: '600' },
    },
  });
  const port = Number(values.port);
  const ttl = Number(values.ttl);
  if (values.help || !Number.isInteger(port) || port < 0 || port > 65535 || !Number.isInteger(ttl) || ttl < 1) {
    console.log(USAGE);
    process.exit(values.help ? 0 : 2);
  }
  const signingKeys = values.keys === undefined ? undefined : (JSON.parse(readFileSync(values.keys, 'utf8')) as { keys: SigningKey[] }).keys;
  const idp = await startIdp({ port, host: process.env.HOST || '127.0.0.1', issuer: values.issuer, audiences: [values.audience], signingKeys, accessTokenTtlSeconds: ttl });
  for (const line of [`issuer ${idp.issuer}`, `jwks_uri ${idp.jwksUri}`, `signing key ${idp.signingKid}`, `a token: ${tokenCurl(idp, values.audience)}`, 'Ctrl-C stops it']) {
    console.log(`idp: ${line}`);
  }
  const stop = () => void idp.close();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, stop);
}

if (import.meta.main) await main();
