import { addProblemType, HttpProblem } from '@app/shared/platform/problem';
import type { Budget } from './budgets.js';

declare module '@app/shared/platform/problem' {
  interface AddedProblemTypes {
    'rate-limited': true;
  }
}

export const RATE_LIMITED = addProblemType('rate-limited', { status: 429, title: 'Too many requests' });

/** Over `budget`, which has room again in `retryAfterSeconds`. */
export const overBudget = (budget: Budget, retryAfterSeconds: number | string) =>
  new HttpProblem(RATE_LIMITED, `Over the budget of ${budget} requests for this client; retry after ${retryAfterSeconds} s`);
