import express from 'express';

/** Express settings every process uses. */
export function baseApp(): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false); // ETags are the resource versions, set by the routes
  app.set('query parser', 'simple');
  return app;
}
