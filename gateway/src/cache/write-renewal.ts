import type { Exchange } from '../exchange.js';
import type { ResponseCache } from './response-cache.js';

/**
 * What a proxied write does to the cache once its service has answered, before the client hears
 * back: one the service may have applied (anything but a 4xx) renews the generations it affects
 * (routing/service-routes.ts), so nobody reads the old data from the cache after that. One whose outcome is unknown
 * (5xx, timeout, connection lost) may still land until the services' write deadline
 * (`serviceWriteDeadlineMs`): what it affects stays out of the cache until then.
 */
export function writeRenewal(cache: ResponseCache, serviceWriteDeadlineMs: number): (exchange: Exchange, status: number) => Promise<void> | undefined {
  return (exchange, status) => {
    const { service, target } = exchange;
    if (!service || !target || exchange.kind !== 'write' || (status >= 400 && status < 500)) return undefined;
    return cache.invalidate(service.writtenKeyings(target), status >= 500 ? { holdMs: serviceWriteDeadlineMs } : {});
  };
}
