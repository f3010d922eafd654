import type { ServerResponse } from 'node:http';
import type { Request, Response } from 'express';
import type { HttpProblem } from '../problem.js';
import { kindOf } from './method-kind.js';

/** Writing a response the process makes itself: a problem+json or a JSON body. */

/**
 * On every response of every process: a browser must take a body as the media type it is sent as,
 * never guess another (a JSON body read as HTML or script). Each writer adds it with its own headers.
 */
export const NOSNIFF = ['X-Content-Type-Options', 'nosniff'] as const;

/** Answers with `problem` (application/problem+json); `instance` is the request's path. */
export function writeProblem(res: ServerResponse, instance: string, problem: HttpProblem): void {
  res.statusCode = problem.status;
  res.setHeader(...NOSNIFF);
  for (const [name, value] of Object.entries(problem.extras.headers ?? {})) res.setHeader(name, value);
  // Every answer to a read says how it may be kept (docs/api.md), a problem too; one that set its
  // own (the health endpoints' no-store) keeps it.
  if (kindOf(res.req?.method) === 'read' && !res.hasHeader('Cache-Control')) res.setHeader('Cache-Control', 'no-cache');
  const body = JSON.stringify(problem.toJSON(instance));
  res.setHeader('Content-Type', 'application/problem+json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

export function sendProblem(req: Request, res: Response, problem: HttpProblem): void {
  writeProblem(res, req.originalUrl.split('?', 1)[0] ?? '/', problem);
}

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** A JSON response: what express's `res.json` sends, without its content negotiation and conversions. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', JSON_CONTENT_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(json));
  res.end(json);
}

