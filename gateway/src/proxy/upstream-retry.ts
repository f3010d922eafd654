import { IDEMPOTENCY_KEY_FIELD } from '@app/shared/platform/http/headers';
import type { MethodKind } from '@app/shared/platform/http/method-kind';
import type { Exchange } from '../exchange.js';
import { isConnectFailure } from './upstream-agent.js';

/**
 * Why a request goes to its service again (Envoy's `retry_on`): `connect`, its connection could not
 * be opened; `reset`, its connection was reset or closed before a byte of the response came.
 */
export type RetryReason = 'connect' | 'reset';

/** What a failed try to a service shows, as the retry decision reads it. */
export interface FailedTry {
  kind: MethodKind;
  /** It carries an Idempotency-Key: the service runs it once however often it comes. */
  keyed: boolean;
  /** Its connection could not be opened: nothing of it was sent. */
  connectFailed: boolean;
  /** Its connection was reset or closed under it (ECONNRESET, "socket hang up", EPIPE). */
  reset: boolean;
  /** A byte of the service's response had come, or the client's response had begun. */
  responseBegan: boolean;
  /** The client went away: nobody waits for a retry's answer. */
  clientGone: boolean;
  /** It was retried already: a request goes again once at most. */
  retried: boolean;
}

/**
 * Whether a failed try goes again, and why. A connection that was never opened carried nothing,
 * so any method may go again. A reset one may have carried the request to a service that acted on
 * it: only a read goes again, or a write the service deduplicates by its Idempotency-Key; a write
 * without one gets its 502, since running it twice is worse than failing it.
 */
export function retryReason(failed: FailedTry): RetryReason | undefined {
  if (failed.retried || failed.clientGone) return undefined;
  if (failed.connectFailed) return 'connect';
  if (!failed.reset || failed.responseBegan) return undefined;
  return failed.kind === 'read' || failed.keyed ? 'reset' : undefined;
}

const RESET_CODES = new Set(['ECONNRESET', 'EPIPE']);

/** What `error`, the failure of the exchange's latest try, shows (the try noted its connection: upstream.ts). */
export function failedTryOf(exchange: Exchange, error: Error): FailedTry {
  const { req, res, upstreamSocket } = exchange;
  return {
    kind: exchange.kind,
    keyed: req.headers[IDEMPOTENCY_KEY_FIELD] !== undefined,
    connectFailed: isConnectFailure(error),
    reset: RESET_CODES.has((error as NodeJS.ErrnoException).code ?? ''),
    responseBegan: res.headersSent || (upstreamSocket !== undefined && upstreamSocket.bytesRead > exchange.upstreamBytesRead),
    clientGone: res.destroyed || req.socket.destroyed,
    retried: exchange.retried,
  };
}
