import { count, megabytes } from '@app/shared/platform/config';

/** The settings of load shedding: the memory the gateway may use and its levels, and each service's slots. */
export const loadSheddingConfig = {
  /** The memory the gateway may use (overload.ts); 0: its container's limit (cgroup), else 256. */
  GATEWAY_MEMORY_LIMIT_MB: megabytes(0, 1_048_576),
  /** The shares of that limit (and of V8's heap limit) at which it stops keep-alive, stops storing new cache entries, and sheds. */
  OVERLOAD_CLOSE_PERCENT: count(80, 1, 100),
  OVERLOAD_NO_STORE_PERCENT: count(90, 1, 100),
  OVERLOAD_SHED_PERCENT: count(95, 1, 100),
  // The services' default DATABASE_POOL_SIZE + DATABASE_QUEUE_LIMIT (see concurrency-limit.ts).
  UPSTREAM_CONCURRENCY_LIMIT: count(210, 2, 100_000),
  UPSTREAM_WRITE_SHARE_PERCENT: count(25, 1, 90),
};
