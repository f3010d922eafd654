import fc from 'fast-check';
import { retryReason, type FailedTry } from '../../src/proxy/upstream-retry.js';

const failedTry = fc.record<FailedTry>({
  kind: fc.constantFrom('read', 'write', 'options'),
  keyed: fc.boolean(),
  connectFailed: fc.boolean(),
  reset: fc.boolean(),
  responseBegan: fc.boolean(),
  clientGone: fc.boolean(),
  retried: fc.boolean(),
});

describe('whether a failed try goes again', () => {
  it('retries a connection never opened, whatever the method: nothing was sent', () => {
    fc.assert(
      fc.property(failedTry, (failed) => {
        fc.pre(failed.connectFailed && !failed.retried && !failed.clientGone);
        expect(retryReason(failed)).toBe('connect');
      }),
    );
  });

  it('retries a reset before any response only for a read or a write with an Idempotency-Key', () => {
    fc.assert(
      fc.property(failedTry, (failed) => {
        fc.pre(!failed.connectFailed && failed.reset && !failed.responseBegan && !failed.retried && !failed.clientGone);
        expect(retryReason(failed)).toBe(failed.kind === 'read' || failed.keyed ? 'reset' : undefined);
      }),
    );
  });

  it('never retries twice, for a client gone, after a response began, or what neither failed to connect nor was reset', () => {
    fc.assert(
      fc.property(failedTry, (failed) => {
        const never = failed.retried || failed.clientGone || (!failed.connectFailed && (failed.responseBegan || !failed.reset));
        if (never) expect(retryReason(failed)).toBeUndefined();
      }),
    );
  });
});
