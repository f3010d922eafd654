/**
 * `npm start` on a machine where nothing answers on MySQL's and Redis's usual ports brings its own
 * (scripts/setup/local-servers.ts), serves the API through the gateway with a token of `npm run
 * token`, and on Ctrl-C stops them after the processes that use them: nothing it started is left.
 * The test makes such a machine out of this one with a network namespace of its own (as root, or
 * as a user mapped to root), where the host's servers are out of reach.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { LOCAL_DIR } from '../../scripts/setup/machine.ts';
import { ROOT, run, type RunningProcess } from '../../tools/process.js';

const asRoot = process.getuid?.() === 0;
/** A command run in the namespace of `pid` (a process of the namespace npm start runs in). */
const inNamespaceOf = (pid: number, command: string[]) => ['nsenter', '-t', String(pid), '-n', ...(asRoot ? [] : ['-U', '--preserve-credentials']), ...command];

/** Processes working in the project's .local folder (a server's data folder): the servers npm start brings. */
function serversOfLocalDir(): string[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/cwd`).startsWith(LOCAL_DIR) ? [`${pid} ${readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')}`] : [];
      } catch {
        return []; // gone, or not ours to read
      }
    });
}

/** GET `path` on the gateway in the namespace of `pid`, with a token of `npm run token`: status and body. */
function getInNamespace(pid: number, path: string): { status: number; body: string } {
  const token = execFileSync(process.execPath, ['scripts/token.ts'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  const script = `const r = await fetch('http://127.0.0.1:8080${path}', { headers: { authorization: 'Bearer ${token}' } }); console.log(JSON.stringify({ status: r.status, body: await r.text() }));`;
  const [command, ...args] = inNamespaceOf(pid, [process.execPath, '--input-type=module', '-e', script]);
  return JSON.parse(execFileSync(command!, args, { encoding: 'utf8' })) as { status: number; body: string };
}

describe('npm start where no MySQL or Redis answers', () => {
  let npm: RunningProcess | undefined;
  afterEach(() => {
    if (npm && npm.child.exitCode === null) process.kill(-npm.child.pid!, 'SIGKILL');
  });

  it('runs its own, serves GET /api/products through the gateway, and Ctrl-C leaves nothing running', async () => {
    expect(serversOfLocalDir()).toEqual([]);
    const unshare = ['unshare', '--net', ...(asRoot ? [] : ['--map-root-user']), '--', 'sh', '-c', 'ip link set lo up && exec npm start'];
    npm = run(unshare[0]!, unshare.slice(1), {}, ROOT, { ownGroup: true });
    await npm.logged((line) => line.service === 'gateway' && String(line.msg).endsWith('listening'));
    const said = npm.said.filter((line) => line.startsWith('npm start:'));
    expect(said).toEqual(
      expect.arrayContaining([
        "npm start: nothing answers on 127.0.0.1:3306: running the project's own MySQL",
        "npm start: nothing answers on 127.0.0.1:6379: running the project's own Redis",
        expect.stringMatching(/^npm start: a token: TOKEN=\$\(npm run -s token\)/),
      ]),
    );
    expect(serversOfLocalDir()).toHaveLength(2);
    const products = getInNamespace(npm.child.pid!, '/api/products');
    expect([products.status, JSON.parse(products.body)]).toEqual([200, { items: expect.any(Array), nextCursor: null }]);

    process.kill(-npm.child.pid!, 'SIGINT');
    expect(await npm.exited).toEqual({ code: 0, signal: null });
    expect(serversOfLocalDir()).toEqual([]);
  }, 120_000);
});
