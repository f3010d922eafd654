import { Redis } from 'ioredis';
import type { Logger } from '@app/shared/platform/logger';

export type { Redis };

/** Redis refused a command that needs memory: maxmemory is reached and nothing may be evicted. */
export const isOutOfMemory = (error: unknown): boolean => error instanceof Error && error.name === 'ReplyError' && /\bOOM\b/.test(error.message);

/**
 * A connection is ready as soon as it connects: RESP2, so no HELLO, and no other handshake command
 * (CLIENT SETINFO) or ready check (INFO) before it. Under load the gateway's event loop reads each reply late, a whole busy
 * iteration (hundreds of ms at 1,000 connections), so every round trip before 'ready' delays the
 * cache's return after an outage by that much. A Redis still loading its data answers LOADING
 * errors meanwhile, which are misses like any other error.
 */
const readyOnConnect = { protocol: 2, enableReadyCheck: false, disableClientInfo: true } as const;

/**
 * Reconnecting is cheap (a refused connection costs nothing), and every second of a lost
 * connection is a second without the cache: try five times a second.
 */
const reconnectSoon = (attempt: number) => Math.min(attempt * 50, 200);

/**
 * A Redis client for a cache: it never queues. While Redis is unreachable every command fails at
 * once (no offline queue, no retries); the client reconnects in the background. A command with no
 * reply fails after `commandTimeoutMs` (10 s by default) at the latest: a hard stop, so a hung Redis
 * never holds commands for ever. A caller that must tell a slow reply from a late read of a busy
 * event loop judges that itself (the gateway's RedisHealth), within this stop: a plain timer here
 * fires late when the event loop is busy. Callers treat failures as misses. `keyPrefix` goes in front
 * of every key, as REDIS_KEY_PREFIX says.
 */
export function createCacheClient(url: string, logger: Logger, options: { commandTimeoutMs?: number; keyPrefix?: string } = {}): Redis {
  const client = new Redis(url, {
    // ioredis puts it in front of every key a command names (EVAL's KEYS included).
    keyPrefix: options.keyPrefix ?? '',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: options.commandTimeoutMs ?? 10_000,
    connectTimeout: 1_000,
    ...readyOnConnect,
    // Commands that concurrent requests issue in the same tick go to Redis in one write.
    enableAutoPipelining: true,
    retryStrategy: reconnectSoon,
  });
  // Say it once per outage, not once per reconnection attempt.
  let reachable = true;
  client.on('ready', () => {
    if (!reachable) logger.info('redis is reachable again');
    reachable = true;
  });
  client.on('error', (error: Error) => {
    if (reachable) logger.warn({ err: error }, 'redis is unreachable: the cache is bypassed until it returns');
    reachable = false;
  });
  return client;
}

/**
 * A RESP2 connection for SUBSCRIBE (in RESP2, client-tracking invalidations redirected to it come as
 * messages on `__redis__:invalidate`), which reconnects in the background and does not resubscribe
 * by itself (the caller does, on each 'ready': a new connection has a new client id). Its errors are
 * not reported: the cache client on the same Redis reports outages.
 */
export function createSubscriberClient(url: string): Redis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1_000,
    ...readyOnConnect,
    autoResubscribe: false,
    retryStrategy: reconnectSoon,
  });
  client.on('error', () => undefined);
  return client;
}
