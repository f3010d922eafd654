import { count, flag, megabytes, milliseconds, seconds } from '@app/shared/platform/config';

/** The settings of the response cache: lifetimes, memory tier, sizes, and how long a write of unknown outcome keeps its entries out. */
export const cacheConfig = {
  CACHE_ENABLED: flag(true),
  CACHE_TTL_SECONDS: seconds(60, 1),
  CACHE_STALE_SECONDS: seconds(300, 0),
  /** Bytes of hot entries each gateway keeps in memory in front of Redis; 0 turns that tier off. */
  CACHE_MEMORY_MB: megabytes(16, 4096),
  /** The largest response body (identity) the cache stores, or compresses: a larger one is answered as it came. */
  CACHE_MAX_ENTRY_BYTES: count(262_144, 1_024, 1_073_741_824),
  /** The bytes of entries one caller may store per entry lifetime (TTL + stale), whatever it reads. */
  CACHE_CALLER_BYTES: count(8_388_608, 1_024, 1_099_511_627_776),
  // The services' default WRITE_DEADLINE_MS plus a second for a COMMIT under way.
  SERVICE_WRITE_DEADLINE_MS: milliseconds(6_000),
};
