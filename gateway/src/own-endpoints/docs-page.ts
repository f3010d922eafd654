import { createRequire } from 'node:module';
import path from 'node:path';
import { DOCUMENT_PATH } from '@app/shared/api-description/openapi';
import { problems } from '@app/shared/platform/problem';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

/** `GET /docs`: a Swagger UI page showing the API description, and its files, all from this origin. */

const swaggerUi = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
/** The files of swagger-ui-dist the page loads, by their media type. */
export const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css',
  'swagger-ui-bundle.js': 'text/javascript',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};
const INITIALIZER = 'swagger-initializer.js';
export const DOCS_FILES = [...Object.keys(ASSETS), INITIALIZER];

/** Only this origin: the page works offline, and nothing it shows can load anything from elsewhere. */
const CONTENT_SECURITY_POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>API documentation</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
  <link rel="icon" type="image/png" href="/docs/favicon-16x16.png" sizes="16x16">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script src="/docs/${INITIALIZER}"></script>
</body>
</html>
`;

// validatorUrl: null, or Swagger UI sends the document to validator.swagger.io.
const INITIALIZER_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '${DOCUMENT_PATH}',
    dom_id: '#swagger-ui',
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
  });
});
`;

export const sendDocsPage: RequestHandler = (_req, res) => {
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  res.type('html').send(DOCS_PAGE);
};

export function sendDocsFile(req: Request<{ file: string }>, res: Response, next: NextFunction) {
  const { file } = req.params;
  res.setHeader('Cache-Control', 'no-cache');
  if (file === INITIALIZER) {
    res.type('text/javascript').send(INITIALIZER_SCRIPT);
    return;
  }
  // Own keys only: `in` would find `constructor` and `__proto__` on every object.
  if (!Object.hasOwn(ASSETS, file)) throw problems.notFound(`No file ${file} in /docs`);
  // Revalidated by Last-Modified (the app sends no ETags but the resources').
  res.sendFile(file, { root: swaggerUi, cacheControl: false }, (error) => {
    if (error) next(error);
  });
}
