/**
 * A count a test reads from the environment (`STALE_CHECK_ROUNDS=10000` for a longer run): a whole
 * number of at least 1, else the run stops here. `Number()` would read `0`, `''` or a typo as zero
 * rounds or NaN, and a loop of zero rounds passes whatever it was to check.
 */
export function countFromEnv(name: string, fallback: number): number {
  return countOf(name, process.env[name], fallback);
}

/** `value` (of the setting or option `name`) as such a count; `fallback` when it is not given. */
export function countOf(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^[1-9]\d{0,8}$/.test(value)) throw new Error(`${name} must be a whole number of at least 1, not ${JSON.stringify(value)}`);
  return Number(value);
}

/** A comma-separated list of such counts (`LOAD_STEPS=64,256`); each must be one. */
export function countsFromEnv(name: string, fallback: number[]): number[] {
  const value = process.env[name];
  if (value === undefined) return fallback;
  if (!/^[1-9]\d{0,8}(,[1-9]\d{0,8})*$/.test(value)) throw new Error(`${name} must be a comma-separated list of whole numbers of at least 1, not ${JSON.stringify(value)}`);
  return value.split(',').map(Number);
}
