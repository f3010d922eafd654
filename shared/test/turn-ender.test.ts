import { LONG_TURN_MS, longTurnCheck } from '@app/shared/platform/http/turn-ender';

/** An event loop under the test's control: its clock, the end of its current turn and the signals sent to end it. */
function loop() {
  const state = { now: 0, signals: 0, endsScheduled: [] as (() => void)[] };
  const check = longTurnCheck({
    now: () => state.now,
    atEndOfTurn: (callback) => state.endsScheduled.push(callback),
    endTurn: () => state.signals++,
  });
  const endTurn = () => {
    for (const callback of state.endsScheduled.splice(0)) callback();
  };
  return { state, check, endTurn };
}

describe('longTurnCheck', () => {
  it('lets a turn shorter than LONG_TURN_MS go on', () => {
    const { state, check } = loop();
    check();
    state.now += LONG_TURN_MS - 1;
    check();
    expect(state.signals).toBe(0);
  });

  it('ends a turn that has gone on for LONG_TURN_MS, once however many requests come', () => {
    const { state, check } = loop();
    check();
    state.now += LONG_TURN_MS;
    check();
    check();
    state.now += 10 * LONG_TURN_MS;
    check();
    expect(state.signals).toBe(1);
  });

  it('times each turn from its first request, so the next long turn is ended too', () => {
    const { state, check, endTurn } = loop();
    check();
    state.now += LONG_TURN_MS;
    check();
    endTurn();
    state.now += 100 * LONG_TURN_MS; // idle: no request, no turn timed
    check();
    state.now += LONG_TURN_MS - 1;
    check();
    expect(state.signals).toBe(1);
    state.now += 1;
    check();
    expect(state.signals).toBe(2);
  });

  it('schedules nothing while no request comes, and one end per turn', () => {
    const { state, check, endTurn } = loop();
    expect(state.endsScheduled).toHaveLength(0);
    check();
    check();
    expect(state.endsScheduled).toHaveLength(1);
    endTurn();
    check();
    expect(state.endsScheduled).toHaveLength(1);
  });
});
