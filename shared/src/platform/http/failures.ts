import type { ServerResponse } from 'node:http';
import type { ErrorRequestHandler } from 'express';
import type { Logger } from '../logger.js';
import { HttpProblem, problems } from '../problem.js';
import { bodyTooLarge, unsupportedEncoding } from './bodies.js';
import { writeProblem } from './responses.js';

/** Turning an error into the problem+json a client sees. */

interface BodyParserError extends Error {
  type?: string;
  status?: number;
  expose?: boolean;
  /** The body limit it met (raw-body's `entity.too.large`): the one jsonBody was given. */
  limit?: number;
}

/** Express's own errors: the router's, and the body parser's by their `type`. */
function expressProblem(error: BodyParserError): HttpProblem | undefined {
  // The router could not percent-decode a path parameter: no resource has such an id.
  if (error.name === 'URIError') return problems.notFound('No resource at this path (it is not valid percent-encoding)');
  switch (error.type) {
    case 'entity.parse.failed':
      return new HttpProblem('malformed-json', 'The request body is not valid JSON');
    case 'entity.too.large':
      return bodyTooLarge(error.limit);
    case 'entity.json.invalid':
      return new HttpProblem('malformed-json', error.message);
    case 'charset.unsupported':
      return new HttpProblem('unsupported-media-type', error.message);
    case 'encoding.unsupported':
      return unsupportedEncoding(error.message);
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return problems.validation([{ path: 'body', message: error.message }]);
    default:
      return undefined;
  }
}

/** The problem an error is: HttpProblems as they are, express's own errors by kind, anything else a 500. */
function problemOf(error: unknown): HttpProblem {
  return (
    (error instanceof HttpProblem ? error : undefined) ??
    expressProblem(error as BodyParserError) ??
    new HttpProblem('internal', 'An unexpected error occurred')
  );
}

/**
 * Answers a request that failed with `error`, for handlers that run before express (see
 * `problemHandler`): a 5xx is logged with its cause; when the response has begun, the connection is
 * cut so the client sees the failure.
 */
export function answerFailure(res: ServerResponse, instance: string, error: unknown, log: Logger): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const problem = problemOf(error);
  if (problem.status >= 500) log.error({ err: error, status: problem.status }, problem.detail);
  writeProblem(res, instance, problem);
}

/**
 * The one place that turns errors into problem+json: HttpProblems as they are (infrastructure errors
 * become HttpProblems where they happen, e.g. in Database), express's own errors by kind, anything
 * else a 500 without details.
 */
export function problemHandler(): ErrorRequestHandler {
  return (error: unknown, req, res, next) => {
    if (res.headersSent) {
      // Too late for a problem response: let express cut the connection so the client sees the failure.
      next(error);
      return;
    }
    answerFailure(res, req.originalUrl.split('?', 1)[0] ?? '/', error, res.locals.log);
  };
}

