import type { IncomingMessage } from 'node:http';
import { ADMIN_ROLE, ROLE_HEADER, SUBJECT_HEADER } from '@app/shared/platform/subject';
import { isStorable, representations } from './entry.js';
import type { Fill, Fills } from './fills.js';
import type { Lookup, ResponseCache } from './response-cache.js';
import type { MemoryPressure } from '../load-shedding/overload.js';
import type { ReadKeying } from './keys.js';
import type { Exchange } from '../exchange.js';
import type { Stage } from '../pipeline.js';
import type { ResponseWriter } from '../respond.js';
import type { ServiceHop } from '../proxy/service-hop.js';
import { upstreamProblem } from '../proxy/upstream.js';

/**
 * Whether the cache may answer this request at all: a GET or HEAD with no body, token or cookie.
 * If-Match on a read is the service's to evaluate (412, or 400 when malformed): the cache only
 * answers If-None-Match. Nor an admin's read where the service's ownership policy says so
 * (`adminReadsUncached`: it sees other owners' records).
 */
function isCacheable(exchange: Exchange): boolean {
  const { headers } = exchange.req;
  return (
    exchange.kind === 'read' &&
    !(exchange.service?.ownership.adminReadsUncached && headers[ROLE_HEADER] === ADMIN_ROLE) &&
    headers.authorization === undefined &&
    headers.cookie === undefined &&
    headers['if-match'] === undefined &&
    headers['content-length'] === undefined &&
    headers['transfer-encoding'] === undefined
  );
}

/**
 * Reads through the cache. A fresh entry is a hit: from this gateway's memory when it holds it (no
 * round trip, answered synchronously), else after one Redis round trip. A miss is fetched once per
 * entry and generation however many requests want it at the same moment (request collapsing,
 * `fills`), stored when storable, and shared; when the service fails or is too busy, an entry that
 * expired less than CACHE_STALE_SECONDS ago is served instead (STALE). A read the cache cannot
 * take part in (not cacheable, Redis unusable, the scope held by a write) goes on to the proxy.
 */
export class CacheRead implements Stage {
  readonly name = 'cache read';

  constructor(
    private readonly options: { cache: ResponseCache; fills: Fills; hops: ReadonlyMap<string, ServiceHop>; writer: ResponseWriter; addressCaller: (req: IncomingMessage) => string; pressure?: MemoryPressure },
  ) {}

  run(exchange: Exchange): boolean | Promise<boolean> {
    const { cache, hops, writer } = this.options;
    const { target, service } = exchange;
    const hop = service && hops.get(service.upstream.name);
    // The caller as identify forwards it: the entries of a service whose records only their owners see are per caller.
    const keying = hop && target && isCacheable(exchange) ? service.readKeying(target, exchange.req.headers[SUBJECT_HEADER] as string | undefined) : undefined;
    if (!hop || !keying) return false;
    const held = cache.held(keying);
    if (held) {
      exchange.cache = 'hit';
      writer.held(exchange, held, { ageSeconds: cache.ageSeconds(held) });
      return true;
    }
    return this.#readThrough(exchange, hop, keying);
  }

  async #readThrough(exchange: Exchange, hop: ServiceHop, keying: ReadKeying): Promise<boolean> {
    const { cache, fills, writer } = this.options;
    const lookup = await cache.lookup(keying);
    if (!lookup) return false;
    const { entry } = lookup;
    if (entry && cache.isFresh(entry, keying)) {
      exchange.cache = 'hit';
      writer.held(exchange, entry, { ageSeconds: cache.ageSeconds(entry) });
      return true;
    }
    const generation = lookup.generation ?? (await cache.generationFor(keying, lookup));
    if (generation === undefined) return false;
    const joined = fills.started(keying, generation);
    const flight = joined ?? this.#startFill(exchange, hop, keying, generation, lookup.storedBytes);
    if (flight) return this.#answerFromFill(exchange, hop, { lookup, keying }, flight, joined === undefined);
    if (this.#serveStale(exchange, lookup, keying)) return true;
    exchange.cache = 'miss';
    writer.problem(exchange, hop.limit.shedProblem());
    return true;
  }

  /**
   * Starts the fill of `keying` under `generation`, to replace the `storedBytes` Redis holds for it;
   * undefined when the service has no slot for it.
   */
  #startFill(exchange: Exchange, hop: ServiceHop, keying: ReadKeying, generation: string, storedBytes: number | undefined): Promise<Fill> | undefined {
    const { cache, fills } = this.options;
    const flight = hop.fetch(exchange);
    if (!flight) return undefined;
    const fill = flight.then(async (fetched) => ({ fetched, representation: await representations(fetched.status, fetched.headers, fetched.body, cache.settings.maxEntryBytes) }));
    // Counted against the caller the rate limits count (caller.ts), even with them off.
    const caller = (exchange.caller ??= this.options.addressCaller(exchange.req));
    const stored = fill
      .then(async ({ fetched, representation }) => {
        // Short of memory (overload.ts), the gateway serves what it fetched and keeps none of it.
        if (isStorable(fetched.status, fetched.headers) && !this.options.pressure?.storesNothing) await cache.store(keying, { generation, storedAt: cache.now(), ...representation }, caller, storedBytes);
      })
      .catch(() => undefined);
    fills.start(keying, generation, fill, stored);
    return fill;
  }

  /** Answers from the fill under way: what it fetched, or stale, or its problem. */
  async #answerFromFill(exchange: Exchange, hop: ServiceHop, { lookup, keying }: { lookup: Lookup; keying: ReadKeying }, underWay: Promise<Fill>, leads: boolean): Promise<true> {
    const { writer } = this.options;
    let fill: Fill;
    try {
      fill = await underWay;
    } catch (error) {
      if (this.#serveStale(exchange, lookup, keying)) return true;
      exchange.cache = 'miss';
      exchange.observed.log.warn({ upstream: hop.upstream.name, err: error }, 'upstream request failed');
      writer.failure(exchange, upstreamProblem(hop.upstream.name, error as Error));
      return true;
    }
    if (fill.fetched.status >= 500 && this.#serveStale(exchange, lookup, keying)) return true;
    exchange.cache = leads ? 'miss' : 'collapsed';
    // A cookie is for the one client whose request made it: never shared with collapsed requests.
    const setCookie = leads ? fill.fetched.headers['set-cookie'] : undefined;
    writer.held(exchange, fill.representation, { setCookie });
    return true;
  }

  #serveStale(exchange: Exchange, lookup: Lookup, keying: ReadKeying): boolean {
    const { cache, writer } = this.options;
    const stale = lookup.entry;
    if (!stale || !cache.isServableStale(stale, keying)) return false;
    exchange.cache = 'stale';
    writer.held(exchange, stale, { ageSeconds: cache.ageSeconds(stale) });
    return true;
  }
}
