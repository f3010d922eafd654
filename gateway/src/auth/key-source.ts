import type { KeyObject } from 'node:crypto';
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { hasScheme, HTTP_SCHEMES } from '@app/shared/platform/config';
import type { Logger } from '@app/shared/platform/logger';
import type { AuthConfig, VerificationKey } from './config.js';
import type { KeyFetchOutcome } from './metrics.js';

/** The gateway could not get the keys to check a token with: a 503, not the client's fault; `retryAfterSeconds` says when to try again. */
export class KeysUnavailable extends Error {
  constructor(
    cause: unknown,
    readonly retryAfterSeconds = 1,
  ) {
    super('The keys to verify access tokens are unavailable', { cause });
    this.name = 'KeysUnavailable';
  }
}

/** Where an identity provider's key set is, and how its fetches are bounded (docs/architecture.md, "The identity provider's keys"). */
export interface RemoteKeySettings {
  /** Its JWKS URL, or its issuer, whose discovery document names the JWKS URL. */
  location: { jwksUrl: string } | { issuer: string };
  /** The least time from one fetch's start to the next one's. */
  cooldownMs: number;
  /** The age past which the set is fetched again before use (while the provider answers). */
  maxAgeMs: number;
  /** The longest a fetch (discovery document and key set together) may take. */
  timeoutMs: number;
  /** The most bytes a document fetched may have. */
  maxBytes: number;
  /** The most keys a key set may hold. */
  maxKeys: number;
  /** The most requests that may wait for a fetch at once; beyond them a request needing one is a 503. */
  maxWaiting: number;
}

/** The settings of the key set the configuration names: its JWKS URL, or (AUTH_DISCOVERY) its issuer's. */
export function remoteKeySettingsOf(config: AuthConfig): RemoteKeySettings {
  return {
    location: config.AUTH_JWKS_URL ? { jwksUrl: config.AUTH_JWKS_URL } : { issuer: config.AUTH_ISSUER },
    cooldownMs: config.AUTH_JWKS_COOLDOWN_MS,
    maxAgeMs: config.AUTH_JWKS_MAX_AGE_SECONDS * 1000,
    timeoutMs: config.AUTH_JWKS_TIMEOUT_MS,
    maxBytes: config.AUTH_JWKS_MAX_BYTES,
    maxKeys: config.AUTH_JWKS_MAX_KEYS,
    maxWaiting: config.AUTH_JWKS_MAX_WAITING,
  };
}

/** The time a key set lives by: the real one, or a test's. */
export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const realClock: Clock = {
  now: Date.now,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref()),
};

/** The discovery document's address (OpenID Connect Discovery 1.0 §4): the issuer without a trailing slash, then the path. */
export const discoveryUrl = (issuer: string) => `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;

/** A document's JSON body, fetched within `signal` and `maxBytes`; anything but a 200 with a JSON object fails. */
async function fetchJson(url: string, signal: AbortSignal, maxBytes: number): Promise<Record<string, unknown>> {
  // Not followed: a redirect would be a fetch of an address nobody configured.
  const response = await fetch(url, { signal, redirect: 'manual', headers: { accept: 'application/json' } });
  const tooLarge = new Error(`${url}: larger than ${maxBytes} bytes`);
  if (response.status !== 200 || Number(response.headers.get('content-length') ?? 0) > maxBytes) {
    await response.body?.cancel();
    throw response.status === 200 ? tooLarge : new Error(`${url}: answered ${response.status}`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (response.body === null) throw new Error(`${url}: no body`);
  for await (const chunk of response.body) {
    size += chunk.byteLength;
    // Leaving the loop cancels the stream: the rest is never read.
    if (size > maxBytes) throw tooLarge;
    chunks.push(chunk);
  }
  const json: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new Error(`${url}: not a JSON object`);
  return json as Record<string, unknown>;
}

/** The kids of a key set's keys (`-` for a key without one), for the log. */
const kidsOf = (set: JSONWebKeySet) => set.keys.map((key) => (typeof key.kid === 'string' ? key.kid : '-'));

/** A good set: its keys as jose matches them, as fetched, and the start of the fetch that brought it. */
interface GoodSet {
  keys: JWTVerifyGetKey;
  jwks: JSONWebKeySet;
  fetchedAt: number;
  /** The number of the fetch that brought it. */
  fetch: number;
  /** Counts the changes of the keys: the same while a fetch brings the same keys. */
  generation: number;
}

/**
 * A fetch, scheduled or under way: its number in the order fetches began (Infinity until it
 * begins), and what it came to (why it failed, or nothing). Numbers, not times, tell which fetch
 * began after a request arrived: two can share a millisecond.
 */
interface Fetch {
  number: number;
  done: Promise<Error | undefined>;
}

/**
 * An identity provider's key set, fetched and kept. A token naming a key the set lacks waits for a
 * fetch that begins after it arrived (at most one per cooldown, shared by every waiting request), so
 * a key is accepted from the moment the provider signs with it. The last good set is kept while the
 * provider fails, however long, so known keys never fail because of an outage; a token that needs a
 * fetch then is a 503 at once rather than a wait for a fetch that will fail too.
 *
 * Not jose's createRemoteJWKSet: it refuses an unknown `kid` within its cooldown instead of waiting
 * for the next fetch, drops its keys once its cache age has passed with the provider down, and
 * neither discovers, caps a response's size, nor tells whether it ever had a set. Its local set
 * (createLocalJWKSet) still imports and matches the keys.
 */
export class RemoteKeySet {
  #set: GoodSet | undefined;
  #next: Fetch | undefined;
  /** How many fetches have begun: the last one's number. */
  #begun = 0;
  #lastStartedAt = -Infinity;
  /** Why the last finished fetch failed; undefined when it succeeded. */
  #lastFailure: Error | undefined;
  #waiting = 0;
  readonly #stopped = new AbortController();
  readonly #clock: Clock;

  constructor(
    private readonly settings: RemoteKeySettings,
    private readonly observers: { logger?: Logger; onFetch?: (outcome: KeyFetchOutcome) => void; clock?: Clock } = {},
  ) {
    this.#clock = observers.clock ?? realClock;
  }

  /**
   * Fetches the set again (a fetch that begins from now on, when the cooldown allows); resolves once
   * it has ended, whatever it came to. At start, so that requests rarely wait.
   */
  async refresh(): Promise<void> {
    await this.#fetchBegunAfter(this.#begun);
  }

  /** Aborts a fetch under way, and every later one. */
  stop(): void {
    this.#stopped.abort(new Error('the gateway is stopping'));
  }

  /**
   * For /readyz: why no token can be checked yet (no set was ever fetched; a fetch is begun), or
   * undefined. Not what failed: that names the provider's addresses, and is in the log.
   */
  unreadyReason(): string | undefined {
    if (this.#set !== undefined) return undefined;
    if (this.#next === undefined) void this.refresh();
    return "The identity provider's keys have not been fetched yet";
  }

  /**
   * The generation of the keys while the set is younger than its max age; undefined without a set
   * or once it has aged. A token verified under a generation may be taken on memory only while that
   * generation holds, so that a retired key's tokens are checked again, and refused.
   */
  get generation(): number | undefined {
    const set = this.#set;
    return set === undefined || this.#clock.now() - set.fetchedAt >= this.settings.maxAgeMs ? undefined : set.generation;
  }

  /** The key for a token's header, as jwtVerify asks for it; rejects with KeysUnavailable when the set cannot be had. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    const begunBefore = this.#begun;
    // Without a set, the fetch under way will do, whenever it began.
    if (this.#set === undefined) await this.#fetchOrFail(this.#next === undefined ? begunBefore : begunBefore - 1);
    else if (this.#clock.now() - this.#set.fetchedAt >= this.settings.maxAgeMs) await this.#renew(this.#set);
    try {
      return await (this.#set as GoodSet).keys(header, token);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
    }
    await this.#fetchOrFail(begunBefore);
    return (this.#set as GoodSet).keys(header, token);
  };

  /** Waits for a fetch numbered after `since`; throws KeysUnavailable when it failed, or when too many wait already. */
  async #fetchOrFail(since: number): Promise<void> {
    if (this.#waiting >= this.settings.maxWaiting) throw new KeysUnavailable(new Error(`${this.#waiting} requests already wait for the key set`), this.#retryAfterSeconds());
    this.#waiting++;
    try {
      const failure = await this.#fetchBegunAfter(since);
      if (failure !== undefined) throw new KeysUnavailable(failure, this.#retryAfterSeconds());
    } finally {
      this.#waiting--;
    }
  }

  /**
   * An aged set, fetched again before use so that a retired key stops working: any fetch begun
   * after the set's will do. While the provider is failing (or too many wait), the request goes on
   * with the last good set, and the fetch is tried without it.
   */
  async #renew(set: GoodSet): Promise<void> {
    const renewal = this.#fetchBegunAfter(set.fetch);
    if (this.#lastFailure !== undefined || this.#waiting >= this.settings.maxWaiting) return;
    this.#waiting++;
    try {
      await renewal;
    } finally {
      this.#waiting--;
    }
  }

  /**
   * What a fetch numbered after `since` came to: the one scheduled, under way or last ended if it
   * is one, else a new one once the cooldown since the last one's start has passed. After a failed
   * fetch, a failure at once until the cooldown has passed: the provider is down, and waiting would
   * not help.
   */
  async #fetchBegunAfter(since: number): Promise<Error | undefined> {
    for (;;) {
      const next = this.#next;
      if (next !== undefined) {
        const failure = await next.done;
        if (failure !== undefined || next.number > since) return failure;
        continue;
      }
      if (this.#begun > since) return this.#lastFailure;
      const now = this.#clock.now();
      const readyAt = this.#lastStartedAt + this.settings.cooldownMs;
      if (this.#lastFailure !== undefined && now < readyAt) return this.#lastFailure;
      this.#next = this.#fetch(Math.max(0, readyAt - now));
    }
  }

  /** A fetch after `delayMs`, which replaces the set when it succeeds, and is logged and counted. */
  #fetch(delayMs: number): Fetch {
    const fetch: Fetch = { number: Infinity, done: Promise.resolve(undefined) };
    fetch.done = (async () => {
      if (delayMs > 0) await this.#clock.sleep(delayMs);
      fetch.number = ++this.#begun;
      const startedAt = (this.#lastStartedAt = this.#clock.now());
      try {
        this.#adopt(await this.#fetchSet(), { fetchedAt: startedAt, fetch: fetch.number });
        this.#lastFailure = undefined;
      } catch (error) {
        this.#lastFailure = error instanceof Error ? error : new Error(String(error), { cause: error });
        if (!this.#stopped.signal.aborted) {
          this.observers.logger?.warn({ err: error, location: this.settings.location }, 'fetching the key set failed');
          this.observers.onFetch?.('failed');
        }
      } finally {
        this.#next = undefined;
      }
      return this.#lastFailure;
    })();
    return fetch;
  }

  /** Whole seconds until the next fetch may begin: at least 1. */
  #retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((this.#lastStartedAt + this.settings.cooldownMs - this.#clock.now()) / 1000));
  }

  /** The key set, from the JWKS URL (given, or from the discovery document), checked against the bounds. */
  async #fetchSet(): Promise<JSONWebKeySet> {
    const signal = AbortSignal.any([this.#stopped.signal, AbortSignal.timeout(this.settings.timeoutMs)]);
    const { location, maxBytes, maxKeys, timeoutMs } = this.settings;
    let jwksUrl, document;
    try {
      jwksUrl = 'jwksUrl' in location ? location.jwksUrl : await this.#discover(location.issuer, signal);
      document = await fetchJson(jwksUrl, signal, maxBytes);
    } catch (error) {
      throw signal.aborted && !this.#stopped.signal.aborted ? new Error(`no whole answer within ${timeoutMs} ms`, { cause: error }) : error;
    }
    const { keys } = document;
    if (!Array.isArray(keys) || !keys.every((key) => typeof key === 'object' && key !== null && !Array.isArray(key))) throw new Error(`${jwksUrl}: not a JWK Set`);
    if (keys.length > maxKeys) throw new Error(`${jwksUrl}: ${keys.length} keys, more than ${maxKeys}`);
    // A private or secret key published is a provider's mistake: trusting its set would trust it.
    if (keys.some((key) => 'd' in key || 'k' in key)) throw new Error(`${jwksUrl}: holds a private or secret key`);
    return { keys } as JSONWebKeySet;
  }

  /** The JWKS URL the issuer's discovery document names, which must name exactly this issuer. */
  async #discover(issuer: string, signal: AbortSignal): Promise<string> {
    const url = discoveryUrl(issuer);
    const document = await fetchJson(url, signal, this.settings.maxBytes);
    if (document.issuer !== issuer) throw new Error(`${url}: its issuer is ${JSON.stringify(document.issuer)}, not ${JSON.stringify(issuer)} (AUTH_ISSUER)`);
    const jwksUri = document.jwks_uri;
    if (typeof jwksUri !== 'string' || !hasScheme(jwksUri, HTTP_SCHEMES)) throw new Error(`${url}: its jwks_uri is not an http or https URL`);
    return jwksUri;
  }

  #adopt(jwks: JSONWebKeySet, when: Pick<GoodSet, 'fetchedAt' | 'fetch'>): void {
    const keys = createLocalJWKSet(jwks);
    const before = this.#set?.jwks;
    const changed = before === undefined || JSON.stringify(before.keys) !== JSON.stringify(jwks.keys);
    const generation = (this.#set?.generation ?? 0) + (changed ? 1 : 0);
    this.#set = { keys, jwks, ...when, generation };
    this.observers.onFetch?.(changed ? 'changed' : 'unchanged');
    if (!changed) return;
    const [was, is] = [before ? kidsOf(before) : [], kidsOf(jwks)];
    this.observers.logger?.info({ added: is.filter((kid) => !was.includes(kid)), removed: was.filter((kid) => !is.includes(kid)), keys: is.length }, 'the key set changed');
  }
}

/** A key given in the config, or an identity provider's key set. */
export type KeySource = { publicKey: VerificationKey } | { remote: RemoteKeySet };

/** What jwtVerify checks tokens with: the configured key (a key set as jose's local set), or the remote set's keys. */
export function keysFrom(source: KeySource): KeyObject | JWTVerifyGetKey {
  if ('remote' in source) return source.remote.getKey;
  const key = source.publicKey;
  return 'keys' in key ? createLocalJWKSet(key as Parameters<typeof createLocalJWKSet>[0]) : key;
}
