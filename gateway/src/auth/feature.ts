import type { Endpoint } from '@app/shared/api-description/openapi';
import type { Logger } from '@app/shared/platform/logger';
import { authDescription } from './description.js';
import { defineFeature, type SettingsOf } from '../feature.js';
import { redisClientOptions } from '../redis/config.js';
import { createCacheClient, redisTarget, type CacheClient } from '../redis/client.js';
import { CLAIM_PRESETS } from './claims.js';
import { authConfig, authConfigProblems, devKeyProblems } from './config.js';
import { RemoteKeySet, remoteKeySettingsOf } from './key-source.js';
import { keyFetchCounter, type KeyFetchOutcome } from './metrics.js';
import { revocationEndpoint } from './revocation-endpoint.js';
import { recordRevocation, RevocationFeed, RevocationList, tokenClockOf } from './revocations.js';
import { authStages } from './stages.js';
import { TokenVerifier } from './tokens.js';

type AuthSettings = SettingsOf<typeof authConfig>;

/**
 * What verifies tokens (while AUTH_ENABLED): `given`, or the configured key, or the identity
 * provider's key set (AUTH_JWKS_URL or AUTH_DISCOVERY), fetched from now on: /readyz waits for it.
 */
function tokenParts(config: AuthSettings, given: TokenVerifier | undefined, onFetch: (outcome: KeyFetchOutcome) => void, logger: Logger): { tokens?: TokenVerifier; remoteKeys?: RemoteKeySet } {
  if (given || !config.AUTH_ENABLED) return { tokens: given };
  const rules = {
    issuer: config.AUTH_ISSUER,
    audience: config.AUTH_AUDIENCE,
    algorithms: config.AUTH_ALGORITHMS,
    clockToleranceSeconds: config.AUTH_CLOCK_TOLERANCE_SECONDS,
    maxLifetimeSeconds: config.AUTH_MAX_TOKEN_LIFETIME_SECONDS,
    claims: CLAIM_PRESETS[config.AUTH_CLAIMS],
  };
  // authConfigProblems made sure exactly one source is set.
  if (config.AUTH_PUBLIC_KEY) return { tokens: new TokenVerifier({ publicKey: config.AUTH_PUBLIC_KEY }, rules) };
  const remoteKeys = new RemoteKeySet(remoteKeySettingsOf(config), { logger, onFetch });
  void remoteKeys.refresh();
  return { tokens: new TokenVerifier({ remote: remoteKeys }, rules), remoteKeys };
}

/**
 * The revoked tokens, in memory, kept in step with Redis over a connection of their own: their
 * polls never wait in line with (or time out among) the cache's commands on a request's path.
 */
function revocationParts(config: AuthSettings, logger: Logger, pollMs = 250): { client: CacheClient; feed: RevocationFeed } {
  const client = createCacheClient(redisTarget(config), logger, redisClientOptions(config));
  const list = new RevocationList(tokenClockOf(config));
  return { client, feed: new RevocationFeed(client, list, { pollMs, logger }) };
}

/** The administration endpoints: revocations, recorded in Redis and known here at once. */
function adminEndpoints(config: AuthSettings, redis: CacheClient, feed: RevocationFeed): Endpoint[] {
  return [
    revocationEndpoint(async (revocation) => {
      const madeAt = await recordRevocation(redis, revocation, tokenClockOf(config));
      await feed.caughtUp();
      return madeAt;
    }),
  ];
}

/** Which keys it trusts, for the gateway's start-up line. */
const keysNamed = (config: AuthSettings) => (config.AUTH_PUBLIC_KEY ? 'AUTH_PUBLIC_KEY' : (config.AUTH_JWKS_URL ?? (config.AUTH_DISCOVERY ? 'AUTH_DISCOVERY' : 'given')));

/**
 * Access: the bearer token and its scopes (`identify`, then `enforce` once the request has counted
 * against its budget), the revoked tokens, the identity provider's keys, and POST /admin/revocations.
 */
export const auth = defineFeature({
  name: 'auth',
  config: authConfig,
  description: authDescription,
  exposedHeaders: ['WWW-Authenticate', 'Retry-After'],
  configProblems: (config, parts) => (parts.tokens ? [] : [...authConfigProblems(config), ...devKeyProblems(config)]),
  create({ config, logger, metrics, writer, parts }) {
    // Registered whatever the key source, so the metric an alert names is always in the scrape.
    const { tokens, remoteKeys } = tokenParts(config, parts.tokens, keyFetchCounter(metrics), logger);
    const revocations = tokens && revocationParts(config, logger, parts.revocationPollMs);
    const { identify, enforce } = authStages({ tokens, revocations: revocations?.feed.list, writer, traceSubject: config.TRACE_RECORD_SUBJECT });
    const details = tokens
      ? { keys: keysNamed(config), issuer: config.AUTH_ISSUER, audience: config.AUTH_AUDIENCE, claims: config.AUTH_CLAIMS, publicReads: config.AUTH_PUBLIC_READS }
      : 'disabled';
    return {
      name: 'auth',
      // identify runs without tokens too: only the gateway says who the caller is.
      stages: { identify, ...(tokens && { admit: enforce }) },
      endpoints: revocations && adminEndpoints(config, revocations.client, revocations.feed),
      // Ready once it has the provider's keys (an outage later leaves it ready: the keys it has still work).
      unreadyReason: () => remoteKeys?.unreadyReason(),
      ready: revocations?.feed.start(),
      details: { auth: details },
      release: () => {
        remoteKeys?.stop();
        revocations?.feed.stop();
        revocations?.client.disconnect();
      },
    };
  },
});
