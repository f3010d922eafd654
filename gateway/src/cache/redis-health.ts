import type { Logger } from '@app/shared/platform/logger';
import { isClusterClient, type CacheClient } from '../redis/client.js';

export interface RedisBreakerSettings {
  /** A command with no reply after this long (and after the event loop has read what came in) fails. */
  timeoutMs: number;
  /** The span over which failures are counted. */
  windowMs: number;
  /** Failures within a window that may open the breaker… */
  minFailures: number;
  /** …when they are at least this share of the window's commands. */
  failureRatio: number;
  /** While open, Redis is asked (PING) this often whether it answers again. */
  probeMs: number;
}

export const defaultBreakerSettings: RedisBreakerSettings = { timeoutMs: 1_000, windowMs: 1_000, minFailures: 5, failureRatio: 0.5, probeMs: 250 };

/** The message of ioredis' own error when its `commandTimeout` passes (a plain Error, no name or code). */
const IOREDIS_COMMAND_TIMEOUT = 'Command timed out';

/**
 * The client is connected: to its Redis, or, on a cluster, to one master at least (a cluster
 * client stays 'ready' with every node gone; a master that fails alone is the breaker's to judge).
 */
function connected(redis: CacheClient): boolean {
  if (redis.status !== 'ready') return false;
  return !isClusterClient(redis) || redis.nodes('master').some((node) => node.status === 'ready');
}

/** A command Redis did not answer in time. */
export class RedisTimeout extends Error {
  constructor(timeoutMs: number) {
    super(`redis did not answer within ${timeoutMs} ms`);
    this.name = 'RedisTimeout';
  }
}

/** Thrown instead of sending a command while Redis is judged down: callers treat it as a miss. */
export class RedisDown extends Error {
  constructor() {
    super('redis is down: command not sent');
    this.name = 'RedisDown';
  }
}

/**
 * Tells "Redis is down" from "this gateway is busy". Under load the gateway's own event loop reads
 * Redis' replies late: a timer that fires after a long busy stretch would call a reply late that has
 * been waiting in the socket all along. So a command's deadline (`timeoutMs`, REDIS_COMMAND_TIMEOUT_MS)
 * passes its verdict only after the event loop has read its sockets once more (setImmediate runs
 * after the poll phase): what fails is a command Redis really did not answer in time. Such a
 * command counts as a failure, like an error. Redis is judged
 * down when its connection is lost, or when within one window at least `minFailures` commands
 * failed and they were at least `failureRatio` of all: a busy gateway still gets most replies, a
 * hung Redis none. While down, commands are not sent at all (callers fail at once, no wait), and a
 * PING every `probeMs` brings the cache back as soon as Redis answers.
 *
 * Our own rather than opossum: opossum judges each call by its own wall-clock timer and an error
 * percentage, so replies that a busy event loop has not read yet count as an outage — the very
 * confusion this class exists to avoid — and it wraps each call in event emission, a cost paid on
 * every cache hit.
 */
export class RedisHealth {
  #open = false;
  #probe: NodeJS.Timeout | undefined;
  #windowStart = 0;
  #calls = 0;
  #failures = 0;

  constructor(
    private readonly redis: CacheClient,
    private readonly logger: Logger,
    private readonly settings: RedisBreakerSettings = defaultBreakerSettings,
  ) {}

  /** Commands may be sent: connected, and not judged down. */
  get up(): boolean {
    return !this.#open && connected(this.redis);
  }

  /** Sends one command when Redis is up (rejects with RedisDown at once otherwise) and counts its outcome. */
  async run<T>(command: (redis: CacheClient) => Promise<T>): Promise<T> {
    if (!this.up) throw new RedisDown();
    const { timeoutMs } = this.settings;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => setImmediate(() => reject(new RedisTimeout(timeoutMs))), timeoutMs);
    });
    try {
      const result = await Promise.race([command(this.redis), deadline]);
      this.#count(false);
      return result;
    } catch (error) {
      // An error reply proves Redis answers; a lost connection speaks for itself (status). What is
      // counted is a live connection on which Redis did not answer in time. The client's own hard
      // stop (its commandTimeout, twice timeoutMs: a plain timer) beats our deadline only when the
      // event loop was busy past both: its replies may well be in the socket, unread, so it is no verdict.
      const answered = (error as Error).name === 'ReplyError';
      const hardStopped = (error as Error).message === IOREDIS_COMMAND_TIMEOUT;
      if (connected(this.redis) && !hardStopped) this.#count(!answered);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  #count(failed: boolean): void {
    const now = Date.now();
    if (now - this.#windowStart >= this.settings.windowMs) {
      this.#windowStart = now;
      this.#calls = 0;
      this.#failures = 0;
    }
    this.#calls++;
    if (!failed) return;
    this.#failures++;
    if (!this.#open && this.#failures >= this.settings.minFailures && this.#failures >= this.#calls * this.settings.failureRatio) this.#trip();
  }

  /** Stops probing a Redis judged down: the gateway is releasing what it holds. */
  close(): void {
    clearInterval(this.#probe);
  }

  #trip(): void {
    this.#open = true;
    this.logger.warn({ failures: this.#failures, commands: this.#calls }, 'redis is not answering: the cache is bypassed until it does');
    this.#probe = setInterval(() => {
      if (!connected(this.redis)) return;
      this.redis.ping().then(
        () => {
          if (!this.#open) return;
          this.#open = false;
          this.#windowStart = 0;
          clearInterval(this.#probe);
          this.logger.info('redis answers again: the cache is in use');
        },
        () => undefined,
      );
    }, this.settings.probeMs).unref();
  }
}
