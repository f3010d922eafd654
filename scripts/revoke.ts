/**
 * `npm run revoke -- --jti <id>` or `npm run revoke -- --sub <subject> [--before <time>]`: revokes
 * one access token, or every token of a subject issued at or before a time (now by default), for
 * every gateway replica within a second. It writes where the gateways read (their REDIS_URL or
 * REDIS_CLUSTER_NODES, REDIS_KEY_PREFIX and AUTH_MAX_TOKEN_LIFETIME_SECONDS, from the environment),
 * as `POST /admin/revocations` does. Run `tsc -b` first (the npm script does).
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '@app/shared/platform/config';
import { createLogger } from '@app/shared/platform/logger';
import { recordRevocation, type Revocation } from '../gateway/dist/auth/revocations.js';
import { configSchema } from '../gateway/dist/config.js';
import { createCacheClient, redisTarget } from '../gateway/dist/redis.js';

const USAGE = `usage: npm run revoke -- --jti <token id>
       npm run revoke -- --sub <subject> [--before <RFC 3339 time, default now>]
Writes to the Redis the gateways read (REDIS_URL or REDIS_CLUSTER_NODES, REDIS_KEY_PREFIX).`;

function revocationOf(values: { jti?: string; sub?: string; before?: string }): Revocation | undefined {
  if (values.jti !== undefined && values.sub === undefined && values.before === undefined) return values.jti === '' ? undefined : { tokenId: values.jti };
  if (values.sub === undefined || values.sub === '' || values.jti !== undefined) return undefined;
  const issuedBefore = values.before === undefined ? Date.now() : Date.parse(values.before);
  return Number.isNaN(issuedBefore) ? undefined : { subject: values.sub, issuedBefore };
}

const { values } = parseArgs({ options: { jti: { type: 'string' }, sub: { type: 'string' }, before: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const revocation = revocationOf(values);
if (!revocation) {
  console.error(USAGE);
  process.exit(2);
}
const config = loadConfig(configSchema);
const logger = createLogger('revoke', 'warn');
const redis = createCacheClient(redisTarget(config), logger, { keyPrefix: config.REDIS_KEY_PREFIX, commandTimeoutMs: 5_000 });
try {
  await new Promise<void>((resolve, reject) => {
    redis.once('ready', resolve);
    setTimeout(() => reject(new Error('Redis did not answer within 5 s')), 5_000).unref();
  });
  const id = await recordRevocation(redis, revocation, config.AUTH_MAX_TOKEN_LIFETIME_SECONDS * 1000);
  const what = 'tokenId' in revocation ? `token ${revocation.tokenId}` : `tokens of ${revocation.subject} issued at or before ${new Date(revocation.issuedBefore).toISOString()}`;
  console.log(`revoked ${what} (entry ${id}); every gateway refuses them within a second`);
} catch (error) {
  console.error(`could not record the revocation: ${(error as Error).message}`);
  process.exitCode = 1;
} finally {
  redis.disconnect();
}
