import { addProblemType, HttpProblem } from '@app/shared/platform/problem';

declare module '@app/shared/platform/problem' {
  interface AddedProblemTypes {
    'bad-gateway': true;
    'gateway-timeout': true;
  }
}

export const BAD_GATEWAY = addProblemType('bad-gateway', { status: 502, title: 'Upstream service unreachable' });
export const GATEWAY_TIMEOUT = addProblemType('gateway-timeout', { status: 504, title: 'Upstream service timed out' });

/** What the service did not do in time: its headers, or the rest of its answer. */
export type Stalled = 'headers' | 'body';

export const upstreamTimedOut = (upstream: string, stalled: Stalled, timeoutMs: number) =>
  new HttpProblem(GATEWAY_TIMEOUT, `The ${upstream} service ${stalled === 'headers' ? 'did not answer' : 'did not finish its answer'} within ${timeoutMs} ms`);

export const upstreamUnreachable = (upstream: string) => new HttpProblem(BAD_GATEWAY, `The ${upstream} service could not be reached`);

export const requestBodyTimedOut = (timeoutMs: number) => new HttpProblem('request-timeout', `The request body did not arrive within ${timeoutMs} ms`);
