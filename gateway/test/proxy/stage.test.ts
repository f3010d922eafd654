import type { IncomingMessage, ServerResponse } from 'node:http';
import { createLogger } from '@app/shared/platform/logger';
import { requestTarget } from '@app/shared/platform/request-target';
import { Exchange } from '../../src/exchange.js';
import { Routing } from '../../src/routing/service-routes.js';
import type { ServiceHop } from '../../src/proxy/service-hop.js';
import { proxyStage } from '../../src/proxy/stage.js';

/** The last stage for a service's requests: each goes to its own service's hop, and is answered there. */
const logger = createLogger('proxy-stage-test', 'silent');
const routing = new Routing([
  { name: 'users', url: 'http://127.0.0.1:1', prefix: '/api/users', cachedReads: true, publicReads: false, owner: 'none' },
  { name: 'products', url: 'http://127.0.0.1:2', prefix: '/api/products', cachedReads: true, publicReads: true, owner: 'none' },
]);

function exchangeOf(method: string, url: string): Exchange {
  const req = { method, url, headers: {} } as unknown as IncomingMessage;
  const target = requestTarget(url);
  return new Exchange(req, {} as ServerResponse, target, routing.service(target), { requestId: 'r-1', log: logger });
}

/** A hop that records the exchanges it was asked to forward. */
function hop() {
  const forwarded: Exchange[] = [];
  return { hop: { forward: (exchange: Exchange) => void forwarded.push(exchange) } as unknown as ServiceHop, forwarded };
}

describe('proxyStage', () => {
  it('is named for what it does, the name a list of the stages shows', () => {
    expect(proxyStage(new Map()).name).toBe('proxy');
  });

  it('forwards a request to the hop of its service, and says it answered it', () => {
    const users = hop();
    const products = hop();
    const stage = proxyStage(new Map([['users', users.hop], ['products', products.hop]]));
    const write = exchangeOf('POST', '/api/products');
    expect(stage.run(write)).toBe(true);
    expect(products.forwarded).toEqual([write]);
    expect(users.forwarded).toEqual([]);
  });

  it('passes on a request for no service, or for a service it has no hop to', () => {
    const users = hop();
    const stage = proxyStage(new Map([['users', users.hop]]));
    expect(stage.run(exchangeOf('GET', '/healthz'))).toBe(false);
    expect(stage.run(exchangeOf('GET', '/api/products'))).toBe(false);
    expect(users.forwarded).toEqual([]);
  });
});
