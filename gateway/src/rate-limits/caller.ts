import type { IncomingMessage } from 'node:http';
import proxyaddr from 'proxy-addr';

/**
 * Who a request without a verified subject is counted as, by the rate limits and the cache's space
 * budget alike: its client's address, as the `trustedProxyHops` proxies in front of the gateway
 * name it (X-Forwarded-For); behind a proxy the socket's address is the proxy's, every client's.
 */
export function addressCallerOf(trustedProxyHops: number): (req: IncomingMessage) => string {
  const trustHop = (_address: string, hop: number) => hop < trustedProxyHops;
  return (req) => `addr:${proxyaddr(req, trustHop)}`;
}
