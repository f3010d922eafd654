/**
 * libuv's poll phase takes up to 1,024 ready sockets from epoll and, when it got that many, polls
 * again at once, up to 48 times, before the loop goes on to its timers, setImmediate callbacks,
 * deferred I/O callbacks (a refused loopback connect is one) and closed handles. A server with more
 * than a thousand connections that each have a request waiting stays in that phase for up to
 * 48 × 1,024 requests, seconds during which none of those ran (its Redis clients, cut off, could not
 * reconnect). The phase ends early when a signal comes in (libuv: "event loop should cycle now"), so a
 * request that finds the loop has not turned for LONG_TURN_MS sends its own process SIGURG (ignored
 * by default, used by nothing else here), at most once per turn. Linux only; no package does this.
 */

/** How long a turn of the event loop may go on before a request asks it to end. */
export const LONG_TURN_MS = 50;

/** What a turn check reads and does: the time, a callback at the end of this turn, a signal that ends it. */
export interface TurnControl {
  now(): number;
  atEndOfTurn(callback: () => void): void;
  endTurn(): void;
}

/**
 * The check each request runs: the first of a turn starts timing it and has `atEndOfTurn` close it,
 * so nothing runs while no request comes (an interval marking the turns would wake every idle
 * process many times a second, for nothing, taking its core from the processes sharing it); a later
 * one, once the turn has gone on for LONG_TURN_MS, calls `endTurn`, at most once per turn.
 */
export function longTurnCheck(control: TurnControl): () => void {
  let turnStartedAt: number | undefined;
  let signalled = false;
  const turnEnded = () => {
    turnStartedAt = undefined;
    signalled = false;
  };
  return () => {
    if (turnStartedAt === undefined) {
      turnStartedAt = control.now();
      control.atEndOfTurn(turnEnded);
      return;
    }
    if (signalled || control.now() - turnStartedAt < LONG_TURN_MS) return;
    signalled = true;
    control.endTurn();
  };
}

let processTurnCheck: (() => void) | undefined;

/** The turn check every server of this process shares: on Linux it ends a long turn with SIGURG; elsewhere it does nothing. */
export function endLongPollPhases(): () => void {
  if (processTurnCheck) return processTurnCheck;
  if (process.platform !== 'linux') return (processTurnCheck = () => undefined);
  // A listener makes libuv watch the signal (and Node does not keep the process alive for it).
  process.on('SIGURG', () => undefined);
  processTurnCheck = longTurnCheck({
    now: () => performance.now(),
    // The check phase comes right after the poll phase: the turn is over.
    atEndOfTurn: (callback) => setImmediate(callback),
    endTurn: () => process.kill(process.pid, 'SIGURG'),
  });
  return processTurnCheck;
}
