/**
 * `npm run token -- --scope users:read,users:write [--admin] [--sub alice] [--ttl 3600]`: prints an
 * access token signed with the development key (dev-keys/signing-key.jwk), for curl and scripts. The
 * token is alone on stdout (`TOKEN=$(npm run -s token -- --scope users:read)`); what it grants goes to
 * stderr. By default every service's read and write scope; `--admin` adds every admin scope.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
// The sources, run as they are: the token needs no build.
import { DEV_AUDIENCE, DEV_ISSUER } from '../shared/src/platform/dev-auth.ts';
import { GATEWAY_ADMIN_SCOPE, readServiceList } from '../shared/src/platform/services.ts';
import { subjectFlaw } from '../shared/src/platform/subject.ts';
import { DEV_SIGNING_KEY_FILE, signDevToken } from '../tools/dev-token.ts';

const services = readServiceList();
const SCOPES = services.flatMap(({ scopes }) => [scopes.read, scopes.write]);
// A service's admin scope reads and writes every owner's records, the gateway's revokes tokens:
// granted only when asked for.
const ADMIN_SCOPES = [...services.map(({ scopes }) => scopes.admin), GATEWAY_ADMIN_SCOPE];
const KNOWN_SCOPES = [...SCOPES, ...ADMIN_SCOPES];
const USAGE = `usage: npm run token -- [--scope ${KNOWN_SCOPES.join(',')}] [--admin] [--sub dev-user] [--ttl 3600]
  --scope  comma-separated scopes to grant (default: every service's read and write)
  --admin  grant also ${ADMIN_SCOPES.join(', ')}: every owner's records, and POST /admin/revocations
  --sub    the token's subject (default: dev-user)
  --ttl    seconds until it expires (default: 3600)
Prints the token alone on stdout, what it grants and its id (jti, for npm run revoke) on stderr.`;

const { values } = parseArgs({
  options: {
    help: { type: 'boolean', short: 'h', default: false },
    admin: { type: 'boolean', default: false },
    scope: { type: 'string', default: SCOPES.join(',') },
    sub: { type: 'string', default: 'dev-user' },
    ttl: { type: 'string', default: '3600' },
    key: { type: 'string', default: DEV_SIGNING_KEY_FILE },
    issuer: { type: 'string', default: process.env.AUTH_ISSUER || DEV_ISSUER },
    audience: { type: 'string', default: process.env.AUTH_AUDIENCE || DEV_AUDIENCE },
  },
});

if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const asked = values.scope.split(',').map((scope) => scope.trim()).filter((scope) => scope !== '');
const scopes = [...new Set([...asked, ...(values.admin ? ADMIN_SCOPES : [])])];
const unknown = scopes.filter((scope) => !KNOWN_SCOPES.includes(scope));
const ttl = Number(values.ttl);
// A subject the gateway would refuse (docs/api.md) makes a token that is no use.
const flaw = subjectFlaw(values.sub);
if (unknown.length > 0 || !Number.isInteger(ttl) || ttl < 1 || flaw !== undefined) {
  const why = [unknown.length > 0 ? `unknown scopes: ${unknown.join(', ')}` : '', flaw === undefined ? '' : `the subject ${flaw}`].filter((line) => line !== '');
  console.error([USAGE, ...why].join('\n'));
  process.exit(2);
}
const tokenId = randomUUID();
const token = await signDevToken({ scopes, subject: values.sub, ttlSeconds: ttl, issuer: values.issuer, audience: values.audience, keyFile: values.key, tokenId });
console.error(`subject ${values.sub}, scopes ${scopes.join(' ') || '(none)'}, expires in ${ttl} s, id ${tokenId}`);
console.log(token);
