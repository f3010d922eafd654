import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type Request, type Response, type Router } from 'express';
import { allowOnly, jsonBody, sendJson } from '../platform/http.js';
import { idempotent, type IdempotencyStore, type StoredResponse } from './idempotency.js';
import { conditionsOf, etagOf, evaluatePreconditions, representation, type ResourceService, type Stored } from './rules.js';

/** What `path` answers (HEAD and OPTIONS come with them); the API description reads these too. */
export const COLLECTION_METHODS = ['GET', 'POST'] as const;
/** What `path/:id` answers. */
export const ITEM_METHODS = ['GET', 'PUT', 'PATCH', 'DELETE'] as const;
/** PATCH takes an RFC 7396 merge patch; plain JSON is accepted as the same. */
export const PATCH_MEDIA_TYPES = ['application/merge-patch+json', 'application/json'] as const;

/** The methods that accept `Idempotency-Key`. */
export const IDEMPOTENT_METHODS = ['POST', 'PATCH'] as const;

/** A resource's HTTP mapping: its express router, and its item read for callers before express. */
export interface ResourceRoutes {
  /** The collection path, e.g. `/api/products`. */
  path: string;
  /** `path` (list, create) and `path/:id` (read, replace, patch, delete). */
  router: Router;
  /** GET/HEAD `path/{id}`: what the router runs for it, as a plain node:http handler. */
  readItem(req: IncomingMessage, res: ServerResponse, id: string): Promise<void>;
}

/**
 * The HTTP mapping of a resource: `path` (list, create) and `path/:id` (read, replace, patch,
 * delete). POST and PATCH honour `Idempotency-Key`, with keys scoped to `path`.
 * Conditional requests follow RFC 9110 §13 on every method: an item's validator is its ETag; a
 * collection exists but has none, so on it `If-Match: *` holds, any other If-Match fails (412),
 * and `If-None-Match: *` on POST fails (412); If-None-Match on a list read is not evaluated (no
 * validator to compare, and the gateway's cache answers the same).
 */
export function resourceRoutes<F extends Record<string, unknown>, Filter>(
  path: string,
  service: ResourceService<F, Filter>,
  idempotency: IdempotencyStore,
): ResourceRoutes {
  // Exact paths only, as platform/request-target.ts spells them (the service refuses other spellings first).
  const router = express.Router({ strict: true, caseSensitive: true });
  const item = `${path}/:id`;

  const sendResource = (res: ServerResponse, resource: Stored<F>, status = 200) => {
    res.setHeader('ETag', etagOf(resource.version));
    sendJson(res, status, representation(resource));
  };

  const readItem = async (req: IncomingMessage, res: ServerResponse, id: string) => {
    const resource = await service.get(id);
    const etag = etagOf(resource.version);
    res.setHeader('Cache-Control', 'no-cache');
    if (evaluatePreconditions(conditionsOf(req.headers), etag, 'read') === 'not-modified') {
      res.statusCode = 304;
      res.setHeader('ETag', etag);
      res.end();
      return;
    }
    sendResource(res, resource);
  };
  /** The response to a write as it is sent, and stored for a retry with the same Idempotency-Key. */
  const written = (resource: Stored<F>, status: number, headers: Record<string, string> = {}): StoredResponse => ({
    status,
    headers: { ...headers, 'Content-Type': 'application/json; charset=utf-8', ETag: etagOf(resource.version) },
    body: JSON.stringify(representation(resource)),
  });

  router
    .route(path)
    .get(async (req: Request, res: Response) => {
      evaluatePreconditions({ ifMatch: req.headers['if-match'] }, undefined, 'read');
      const page = await service.list(req.query);
      res.setHeader('Cache-Control', 'no-cache');
      sendJson(res, 200, { items: page.items.map(representation), nextCursor: page.nextCursor });
    })
    .post(
      jsonBody(),
      idempotent(idempotency, path, async (req) => {
        evaluatePreconditions(conditionsOf(req.headers), undefined, 'write');
        const created = await service.create(req.body);
        return written(created, 201, { Location: `${path}/${created.id}` });
      }),
    )
    .all(allowOnly(COLLECTION_METHODS));

  router
    .route(item)
    .get((req: Request<{ id: string }>, res: Response) => readItem(req, res, req.params.id))
    .put(jsonBody(), async (req: Request<{ id: string }>, res: Response) => {
      sendResource(res, await service.replace(req.params.id, req.body, conditionsOf(req.headers)));
    })
    .patch(
      jsonBody(PATCH_MEDIA_TYPES),
      idempotent(idempotency, path, async (req) => written(await service.patch(req.params.id as string, req.body, conditionsOf(req.headers)), 200)),
    )
    .delete(async (req: Request<{ id: string }>, res: Response) => {
      await service.delete(req.params.id, conditionsOf(req.headers));
      res.status(204).end();
    })
    .all(allowOnly(ITEM_METHODS));

  return { path, router, readItem };
}
