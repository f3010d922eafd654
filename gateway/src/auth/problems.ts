import { addProblemType, HttpProblem } from '@app/shared/platform/problem';

declare module '@app/shared/platform/problem' {
  interface AddedProblemTypes {
    'unauthorized': true;
    'insufficient-scope': true;
  }
}

export const UNAUTHORIZED = addProblemType('unauthorized', { status: 401, title: 'Missing or invalid access token' });
export const INSUFFICIENT_SCOPE = addProblemType('insufficient-scope', { status: 403, title: 'Insufficient scope' });

/** A Bearer challenge (RFC 6750) for WWW-Authenticate: the realm, then `params`. */
export const challenge = (params: string) => `Bearer realm="api", ${params}`;

export const unauthorized = (detail: string, wwwAuthenticate: string) => new HttpProblem(UNAUTHORIZED, detail, { headers: { 'WWW-Authenticate': wwwAuthenticate } });

export const insufficientScope = (scope: string) =>
  new HttpProblem(INSUFFICIENT_SCOPE, `This request needs the ${scope} scope, which the access token does not grant`, {
    headers: { 'WWW-Authenticate': challenge(`error="insufficient_scope", scope="${scope}"`) },
  });
