import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { kindOf, type MethodKind } from '@app/shared/platform/http/method-kind';
import type { ObservedRequest } from '@app/shared/platform/http/observation';
import type { HttpProblem } from '@app/shared/platform/problem';
import type { RequestTarget } from '@app/shared/platform/request-target';
import { API_PREFIX } from '@app/shared/platform/services';
import type { ServiceRoute } from './routing/service-routes.js';

/** What the cache did for a request, as the metrics count it (`X-Cache` says less: a collapsed request is a MISS). */
export type CacheOutcome = 'hit' | 'miss' | 'collapsed' | 'stale' | 'bypass';

const EXCHANGE = Symbol('exchange');
type WithExchange = IncomingMessage & { [EXCHANGE]?: Exchange };

/**
 * One request on its way through the gateway's stages (pipeline.ts) and what they decided about
 * it: the one object each stage reads and writes, made when the request arrives. The response
 * writer (respond.ts) turns what is here into the gateway's own headers.
 */
export class Exchange {
  /** Who the rate limits and the fair share of a service's slots count it against: `sub:<subject>` or `addr:<address>`. */
  caller: string | undefined = undefined;
  /** The RateLimit headers its budget gave it, for its response (rate-limits/stage.ts: `rateLimitHeaders`). */
  rateLimit: Record<string, string> | undefined = undefined;
  /** Response headers stages decided (name, value, name, value…; each stage appends), for whatever answers the request (respond.ts). */
  responseHeaders: string[] | undefined = undefined;
  /** A refusal the auth stage decided, answered once the request has counted against its budget. */
  refusal: HttpProblem | undefined = undefined;
  /** A CORS preflight from an allowed origin: answered once counted, never authenticated. */
  preflight = false;
  /** What the cache did; undefined while it did nothing (a read under /api is then a bypass). */
  cache: CacheOutcome | undefined = undefined;
  /** The request body, received whole before the request takes a slot to its service. */
  body: Buffer | undefined = undefined;
  /** Gives back its slot to its service (service-hop.ts): once the service has answered, or the client has gone. */
  releaseSlot: (() => void) | undefined = undefined;
  /** Whether its connection must close after the response (its body may still be arriving). */
  closeConnection = false;
  /**
   * The connection its latest try to the service went on, and the bytes that connection had read
   * before it: more since means a response began, and the try may not go again (upstream-retry.ts).
   */
  upstreamSocket: Socket | undefined = undefined;
  upstreamBytesRead = 0;
  /** Whether it was sent to its service a second time (once at most). */
  retried = false;
  #kind: MethodKind | undefined = undefined;
  /** Every request under /api (canonical or not) is authenticated; the gateway's own endpoints are not. */
  readonly underApi: boolean;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    /** Its target in canonical form; undefined when it has none (a 404). */
    readonly target: RequestTarget | undefined,
    /** The service it is for, if any (routing/service-routes.ts). */
    readonly service: ServiceRoute | undefined,
    /** Its id, and its logger (made on first use); its log line is written when its response is done. */
    readonly observed: ObservedRequest,
  ) {
    this.underApi = target ? target.api !== undefined : isApiPath(req.url ?? '/');
    (req as WithExchange)[EXCHANGE] = this;
  }

  get requestId(): string {
    return this.observed.requestId;
  }

  /** The path a problem names as its `instance`. */
  get path(): string {
    return this.target?.path ?? (this.req.url ?? '/').split('?', 1)[0] ?? '/';
  }

  /** Read, write or OPTIONS (shared/src/platform/http/method-kind.ts): what its budget, slot, scope and cache path are. */
  get kind(): MethodKind {
    return (this.#kind ??= kindOf(this.req.method));
  }
}

const isApiPath = (url: string) => url === API_PREFIX || url.startsWith(`${API_PREFIX}/`) || url.startsWith(`${API_PREFIX}?`);

/** The exchange of a request, for code that is handed only the request (the proxy's events, the metrics). */
export const exchangeOf = (req: IncomingMessage): Exchange | undefined => (req as WithExchange)[EXCHANGE];
