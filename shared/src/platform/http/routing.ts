import type { RequestHandler } from 'express';
import { problems } from '../problem.js';
import { requestTarget } from '../request-target.js';
import { kindOf } from './method-kind.js';

/** What a route answers beyond its handlers: OPTIONS and 405 with Allow, 404 for a path no route has. */

/** The answer to a request target with no canonical form (see request-target.ts). */
export const noCanonicalForm = () => problems.notFound('No resource at this path: it is not in its canonical form');

/** 404 for a request target with no canonical form: the services act only on canonical paths. */
export const canonicalTargetsOnly: RequestHandler = (req, _res, next) => {
  if (requestTarget(req.url) === undefined) throw noCanonicalForm();
  next();
};

export const notFound: RequestHandler = (req) => {
  throw problems.notFound(`No route for ${req.method} ${req.path}`);
};

/** The methods a route that implements `methods` answers: HEAD comes with GET (express runs GET for it). */
export function answeredMethods(methods: readonly string[]): string[] {
  return methods.flatMap((method) => (method === 'GET' ? ['GET', 'HEAD'] : [method]));
}

/** Ends a route: 204 with Allow for OPTIONS, 405 with Allow for any other method. */
export function allowOnly(methods: readonly string[]): RequestHandler {
  const allow = answeredMethods(methods);
  return (req, res) => {
    if (kindOf(req.method) === 'options') {
      res.setHeader('Allow', [...allow, 'OPTIONS'].join(', '));
      res.status(204).end();
      return;
    }
    throw problems.methodNotAllowed(req.method, allow);
  };
}

