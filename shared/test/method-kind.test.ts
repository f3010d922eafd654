import { kindOf } from '@app/shared/platform/http/method-kind';

/** One answer to "read or write?" for every stage: budget, slot share, scope, cache and retries all follow from it. */
describe('kindOf', () => {
  it('counts GET and HEAD as reads, OPTIONS as itself, POST, PUT, PATCH, DELETE and any other method as writes', () => {
    expect(['GET', 'HEAD'].map(kindOf)).toEqual(['read', 'read']);
    expect(kindOf('OPTIONS')).toBe('options');
    expect(['POST', 'PUT', 'PATCH', 'DELETE', 'PURGE', 'get', undefined].map(kindOf)).toEqual(Array(7).fill('write'));
  });
});
