/**
 * The new-token load of `npm run bench -- --jwks` (bench/jwks.ts): each run over a gateway process
 * goes on in the token file from where the run before stopped, so that no request brings a token
 * the process still remembers, and every request has its signature checked.
 */
import { REMEMBERED_TOKENS } from '../../gateway/dist/auth/tokens.js';
import { nextStart } from '../../bench/jwks.ts';

const TOKENS = 2 * REMEMBERED_TOKENS;
const CONNECTIONS = 64;

/** The gateway's memory of verified tokens, as lru-cache keeps it: at most REMEMBERED_TOKENS, the least recently used forgotten first. */
class Remembered {
  readonly #tokens = new Set<number>();
  /** Whether `token` was remembered; it is remembered now, as the most recently used. */
  meet(token: number): boolean {
    const known = this.#tokens.delete(token);
    this.#tokens.add(token);
    if (this.#tokens.size > REMEMBERED_TOKENS) this.#tokens.delete(this.#tokens.values().next().value!);
    return known;
  }
}

/**
 * Runs that each answer `answered` requests and send up to CONNECTIONS more (in flight when wrk
 * stops), starting one line after their start (wrk drops the first request it asks for) or at it,
 * against a memory like the gateway's: the tokens that came again while remembered.
 */
function rememberedTokensMet(runs: { answered: number; inFlight: number; dropped: 0 | 1 }[]): number {
  const remembered = new Remembered();
  let start = 0;
  let met = 0;
  for (const { answered, inFlight, dropped } of runs) {
    for (let sent = 0; sent < answered + inFlight; sent++) {
      if (remembered.meet((start + dropped + sent) % TOKENS)) met++;
    }
    start = nextStart(start, answered, CONNECTIONS, TOKENS);
  }
  return met;
}

test.each([
  ['short runs, none in flight', Array.from({ length: 12 }, () => ({ answered: 3_000, inFlight: 0, dropped: 0 as const }))],
  ['short runs, every connection in flight', Array.from({ length: 12 }, () => ({ answered: 3_000, inFlight: CONNECTIONS, dropped: 1 as const }))],
  ['runs longer than the file, mixed', [9_999, 25_000, 1, 47_321, 12_345, 20_000].map((answered, i) => ({ answered, inFlight: (i * 13) % (CONNECTIONS + 1), dropped: (i % 2) as 0 | 1 }))],
])('%s: no run brings a token the gateway still remembers', (_, runs) => {
  expect(rememberedTokensMet(runs)).toBe(0);
});

test('more connections than tokens the gateway forgets between two of its turns are refused', () => {
  expect(() => nextStart(0, 100, TOKENS - REMEMBERED_TOKENS, TOKENS)).toThrow(/could skip over tokens the gateway still remembers/);
});
