/**
 * The benches' count options (`--runs`, `--seconds`, `--connections`): a value that is not a whole
 * number of at least 1 stops the bench before it starts anything, instead of making zero runs.
 */
import { spawnSync } from 'node:child_process';

const ROOT = new URL('../..', import.meta.url).pathname;
const run = (...args: string[]) => spawnSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });

test.each([
  ['bench/breakdown.ts', '--runs', '0'],
  ['bench/breakdown.ts', '--seconds', 'five'],
  ['bench/gateway-ab.ts', '--runs', '0'],
  ['bench/gateway-ab.ts', '--connections', ''],
])('%s %s %j is refused at once, naming the option', (script, option, value) => {
  const refused = run(script, ...(script.endsWith('gateway-ab.ts') ? ['/nonexistent-checkout'] : []), `${option}=${value}`);
  expect(refused.status).toBe(1);
  expect(refused.stderr).toContain(`${option} must be a whole number of at least 1, not ${JSON.stringify(value)}`);
});
