import { createHash } from 'node:crypto';
import { DOCUMENT_PATH, documentOutline, type OpenApiDocument } from '@app/shared/api-description/openapi';
import { REQUEST_ID_FIELD } from '@app/shared/platform/http/headers';
import type { Logger } from '@app/shared/platform/logger';
import { problems } from '@app/shared/platform/problem';
import { compressVariants, type ContentCoding } from '../cache/compression.js';
import type { Deadlines } from '../proxy/upstream.js';
import type { Upstream } from '../upstream-model.js';

/** How long an answer about the services' descriptions stands before they are asked again. */
export const DESCRIPTION_CHECK_MS = 1_000;

/** The merged document as it is sent: its bytes (and compressed variants), made once, and their ETag. */
export interface BuiltDescription {
  body: Buffer;
  variants: Partial<Record<ContentCoding, Buffer>>;
  /** Strong, of `body`; a compressed variant is the same document, so it goes out weak (`W/`). */
  etag: string;
}

type Merge = (parts: readonly { upstream: Upstream; document: OpenApiDocument }[]) => OpenApiDocument;

/**
 * The gateway's API description, merged from what each service describes, built once for each
 * change of those descriptions and never per request: a client asking for it costs a lookup, and
 * the services are asked at most once per DESCRIPTION_CHECK_MS, by one request that the others
 * asking meanwhile wait for. A service that cannot be asked is replaced by the last description it
 * gave; before it ever gave one, the answer is a 503 (also kept for DESCRIPTION_CHECK_MS).
 */
export class KeptDescription {
  /** Each service's last good description, as the text it sent. */
  readonly #texts = new Map<string, string>();
  #built: (BuiltDescription & { from: string }) | undefined = undefined;
  #checked: { at: number; outcome: Promise<BuiltDescription> } | undefined = undefined;

  constructor(
    private readonly upstreams: readonly Upstream[],
    private readonly deadlines: Deadlines,
    private readonly merge: Merge,
    private readonly now: () => number = performance.now.bind(performance),
  ) {}

  /** The description as it stands; `log` and `requestId` are those of the request that asked. */
  current(log: Logger, requestId: string): Promise<BuiltDescription> {
    const now = this.now();
    if (this.#checked && now - this.#checked.at < DESCRIPTION_CHECK_MS) return this.#checked.outcome;
    const outcome = this.#check(log, requestId);
    // Answered (a rejection too) by whoever awaits it; kept so that nobody else asks meanwhile.
    outcome.catch(() => undefined);
    this.#checked = { at: now, outcome };
    return outcome;
  }

  async #check(log: Logger, requestId: string): Promise<BuiltDescription> {
    const texts = await Promise.all(this.upstreams.map((upstream) => this.#describe(upstream, log, requestId)));
    const from = texts.join('\n');
    if (this.#built?.from === from) return this.#built;
    const parts = this.upstreams.map((upstream, i) => ({ upstream, document: JSON.parse(texts[i] as string) as OpenApiDocument }));
    const body = Buffer.from(JSON.stringify(this.merge(parts)));
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
    this.#built = { body, variants: await compressVariants(body), etag, from };
    return this.#built;
  }

  /** The text of `upstream`'s description: as it answers now, else as it last answered well. */
  async #describe(upstream: Upstream, log: Logger, requestId: string): Promise<string> {
    try {
      const response = await fetch(new URL(DOCUMENT_PATH, upstream.url), {
        headers: { accept: 'application/json', [REQUEST_ID_FIELD]: requestId },
        signal: AbortSignal.timeout(this.deadlines.upstreamMs),
      });
      if (!response.ok) throw new Error(`${DOCUMENT_PATH} answered ${response.status}`);
      const text = await response.text();
      if (!documentOutline.safeParse(JSON.parse(text)).success) throw new Error(`${DOCUMENT_PATH} is not an OpenAPI 3.1 document`);
      this.#texts.set(upstream.name, text);
      return text;
    } catch (error) {
      const previous = this.#texts.get(upstream.name);
      log.warn({ upstream: upstream.name, err: error, usingPrevious: previous !== undefined }, 'could not fetch the API description of an upstream');
      if (previous !== undefined) return previous;
      throw problems.unavailable(`The API description of the ${upstream.name} service is unavailable; try again shortly`, error);
    }
  }
}
