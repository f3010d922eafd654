import { fileURLToPath } from 'node:url';
import { RELEASE_TIMEOUT_MS } from '../src/platform/server.js';
import { run } from '../../tools/process.js';

const FIXTURE = fileURLToPath(new URL('fixtures/hung-release.mjs', import.meta.url));
const SIGNALLED_AT_START = fileURLToPath(new URL('fixtures/signalled-at-start.mjs', import.meta.url));
let started: ReturnType<typeof run> | undefined;
// Gone already when the test passed; when it failed, nothing of it may outlive the test.
afterEach(() => started?.child.kill('SIGKILL'));

it('exits 1, saying so, when releasing its pools outlasts the drain by more than the release bound', async () => {
  const shutdownTimeoutMs = 200;
  const child = (started = run(process.execPath, [FIXTURE], { SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs) }));
  await child.logged((line) => line.msg === 'hung-release listening');
  const signalledAt = performance.now();
  child.child.kill('SIGTERM');
  expect(await child.exited).toEqual({ code: 1, signal: null });
  expect(performance.now() - signalledAt).toBeGreaterThanOrEqual(shutdownTimeoutMs + RELEASE_TIMEOUT_MS - 50);
  expect(child.lines).toContainEqual(expect.objectContaining({ msg: 'shutdown did not finish in time: exiting without it', afterMs: shutdownTimeoutMs + RELEASE_TIMEOUT_MS }));
}, 20_000);

it('shuts down gracefully on a SIGTERM sent the moment it says it listens', async () => {
  const child = (started = run(process.execPath, [SIGNALLED_AT_START], {}));
  expect(await child.exited).toEqual({ code: 0, signal: null });
  expect(child.lines.map((line) => line.msg)).toEqual(['signalled-at-start listening', 'shutting down: draining in-flight requests', 'shutdown complete']);
}, 20_000);
