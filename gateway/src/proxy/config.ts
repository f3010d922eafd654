import { milliseconds } from '@app/shared/platform/config';

/** The settings of the proxy: how long a service may take to answer. */
export const proxyConfig = {
  UPSTREAM_TIMEOUT_MS: milliseconds(10_000),
};
