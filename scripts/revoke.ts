/**
 * `npm run revoke -- --token <jwt>`, `npm run revoke -- --jti <id> [--expires <time>]` or
 * `npm run revoke -- --sub <subject> [--before <time>]`: revokes one access token, or every token of
 * a subject issued before a time (now by default), for every gateway replica within a second. Given
 * the whole token, it takes its id (the `jti`, or the claim AUTH_CLAIMS names) and the `exp` from it
 * (the signature is not checked: the token is only named). It writes where the gateways read (their REDIS_URL or REDIS_CLUSTER_NODES,
 * REDIS_KEY_PREFIX, AUTH_MAX_TOKEN_LIFETIME_SECONDS and AUTH_CLOCK_TOLERANCE_SECONDS, from the
 * environment), as `POST /admin/revocations` does. Run `tsc -b` first (the npm script does).
 */
import { parseArgs } from 'node:util';
import { decodeJwt } from 'jose';
import { loadConfig } from '@app/shared/platform/config';
import { createLogger } from '@app/shared/platform/logger';
import { subjectFlaw } from '@app/shared/platform/subject';
import { CLAIM_PRESETS } from '../gateway/dist/auth/claims.js';
import { recordRevocation, tokenClockOf, type Revocation } from '../gateway/dist/auth/revocations.js';
import { configSchema } from '../gateway/dist/config.js';
import { createCacheClient, redisTarget } from '../gateway/dist/redis/client.js';

const USAGE = `usage: npm run revoke -- --token <access token>
       npm run revoke -- --jti <token id> [--expires <its exp, RFC 3339>]
       npm run revoke -- --sub <subject> [--before <RFC 3339 time, default now>]
Writes to the Redis the gateways read (REDIS_URL or REDIS_CLUSTER_NODES, REDIS_KEY_PREFIX).
A token's id is its jti, or the claim AUTH_CLAIMS reads it from (uti for entra).`;

type Arguments = { token?: string; jti?: string; expires?: string; sub?: string; before?: string };

/** A time given on the command line (ms), undefined when none is; NaN when it is not one. */
const timeOf = (value: string | undefined): number | undefined => (value === undefined ? undefined : Date.parse(value));

/** The id (its claim `tokenIdClaim`) and `exp` of a token, or undefined when it is no JWT with an id. */
function tokenRevocation(token: string, tokenIdClaim: string): Revocation | undefined {
  try {
    const payload = decodeJwt(token);
    const tokenId = payload[tokenIdClaim];
    if (typeof tokenId !== 'string' || tokenId === '') return undefined;
    return typeof payload.exp === 'number' ? { tokenId, expiresAt: payload.exp * 1000 } : { tokenId };
  } catch {
    return undefined;
  }
}

function revocationOf({ token, jti, expires, sub, before }: Arguments, tokenIdClaim: string): Revocation | undefined {
  const given = [token, jti, sub].filter((value) => value !== undefined).length;
  if (given !== 1) return undefined;
  if (token !== undefined) return expires === undefined && before === undefined ? tokenRevocation(token, tokenIdClaim) : undefined;
  if (jti !== undefined) {
    const expiresAt = timeOf(expires);
    if (jti === '' || before !== undefined || Number.isNaN(expiresAt)) return undefined;
    return expiresAt === undefined ? { tokenId: jti } : { tokenId: jti, expiresAt };
  }
  const issuedBefore = timeOf(before);
  if (subjectFlaw(sub) !== undefined || expires !== undefined || Number.isNaN(issuedBefore)) return undefined;
  return issuedBefore === undefined ? { subject: sub! } : { subject: sub!, issuedBefore };
}

const named = (revocation: Revocation, madeAt: number): string => {
  if ('tokenId' in revocation) return `token ${revocation.tokenId}${revocation.expiresAt === undefined ? '' : ` (expiring ${new Date(revocation.expiresAt).toISOString()})`}`;
  return `tokens of ${revocation.subject} issued until ${new Date(Math.min(revocation.issuedBefore ?? madeAt, madeAt)).toISOString()}`;
};

const options = { token: { type: 'string' }, jti: { type: 'string' }, expires: { type: 'string' }, sub: { type: 'string' }, before: { type: 'string' }, help: { type: 'boolean', short: 'h' } } as const;
const { values } = parseArgs({ options });
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const config = loadConfig(configSchema);
const revocation = revocationOf(values, CLAIM_PRESETS[config.AUTH_CLAIMS].tokenId);
if (!revocation) {
  console.error(USAGE);
  process.exit(2);
}
const logger = createLogger('revoke', 'warn');
const redis = createCacheClient(redisTarget(config), logger, { keyPrefix: config.REDIS_KEY_PREFIX, commandTimeoutMs: 5_000 });
try {
  await new Promise<void>((resolve, reject) => {
    redis.once('ready', resolve);
    setTimeout(() => reject(new Error('Redis did not answer within 5 s')), 5_000).unref();
  });
  const madeAt = await recordRevocation(redis, revocation, tokenClockOf(config));
  console.log(`revoked ${named(revocation, madeAt)} at ${new Date(madeAt).toISOString()}; every gateway refuses them within a second`);
} catch (error) {
  console.error(`could not record the revocation: ${(error as Error).message}`);
  process.exitCode = 1;
} finally {
  redis.disconnect();
}
