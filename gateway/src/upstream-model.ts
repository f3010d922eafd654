import type { Ownership } from '@app/shared/platform/ownership-policy';
import type { ServiceEntry } from '@app/shared/platform/services';

/** A service the gateway sends requests to: the model routing, the proxy and the API description share. */
export interface Upstream {
  /** A name for logs and problem details; never a host name. */
  name: string;
  url: string;
  /** The path prefix it serves, e.g. `/api/users` (and everything below it). */
  prefix: string;
}

/** A listed service as the gateway proxies it. */
export interface ServedUpstream extends Upstream {
  /** The gateway caches its GETs. */
  cachedReads: boolean;
  /** Its GETs need no token. */
  publicReads: boolean;
  /** Who may see and change its records (services.json). */
  owner: Ownership;
  /** How long the cache serves its reads (services.json), where it sets that; else CACHE_TTL_SECONDS and CACHE_STALE_SECONDS. */
  cache?: ServiceEntry['cache'];
  /** The largest request body it takes (services.json), where it sets one; else BODY_LIMIT_BYTES. */
  body?: ServiceEntry['body'];
}
