/**
 * `npm start -- --idp`: the development OpenID provider (scripts/idp.ts) beside the stack, the
 * gateway trusting its keys instead of the development key; the curl it prints gets a token the
 * gateway accepts, and Ctrl-C stops the provider with the rest.
 */
import { execFileSync } from 'node:child_process';
import { IDP_CLIENTS } from '../../scripts/idp.js';
import { client, CLOSING_CONNECTION, expectProblem } from '../support/http.js';
import { ROOT, run, usersOnlyServicesFile } from '../../tools/process.js';
import { reaches } from '../support/raw-socket.js';
import { throwawayDatabases } from '../support/stack.js';
import { closedPort } from '../../tools/tcp-proxy.js';

const databaseUrl = throwawayDatabases();
let stopGroup: (() => void) | undefined;
afterEach(() => stopGroup?.());

/** The words of the curl `npm start` printed: its -u, each -d and the URL. */
function curlParts(curl: string) {
  // Shell words: a quoted part (scope='a b') stays in its word.
  const words = [...curl.matchAll(/(?:[^\s']|'[^']*')+/g)].map(([word]) => word.replaceAll("'", ''));
  const after = (flag: string) => words.flatMap((word, i) => (words[i - 1] === flag ? [word] : []));
  return { user: after('-u')[0]!, form: new URLSearchParams(after('-d').join('&')), url: words.at(-1)! };
}

it('starts the provider, points the gateway at it, prints the curl for a token, and Ctrl-C stops it', async () => {
  const env = { SERVICES_FILE: await usersOnlyServicesFile(), DATABASE_URL: databaseUrl('npm-start-idp'), REDIS_URL: process.env.TEST_REDIS_URL!, PORT: String(await closedPort()) };
  const npm = run('npm', ['start', '--silent', '--', '--idp', '--idp-port', '0'], env, undefined, { ownGroup: true });
  stopGroup = () => {
    try {
      process.kill(-npm.child.pid!, 'SIGKILL');
    } catch {
      // the group has exited
    }
  };
  const listening = (service: string) => (line: Record<string, unknown>) => line.service === service && String(line.msg).endsWith('listening');
  const [gatewayListening] = await Promise.all([npm.logged(listening('gateway')), npm.logged(listening('users-service'))]);
  const issuer = /^npm start: the OpenID provider: (\S+) /.exec(npm.said.find((line) => line.includes('the OpenID provider')) ?? '')?.[1];
  const curl = npm.said.find((line) => line.startsWith('npm start: a token (its access_token): curl '))!;
  const { user, form, url } = curlParts(curl);
  expect([user, form.get('grant_type'), url]).toEqual([`${IDP_CLIENTS[0].id}:${IDP_CLIENTS[0].secret}`, 'client_credentials', `${issuer}/token`]);

  // What the printed curl sends, sent (closing its connection, as curl does).
  const issued = await fetch(url, { method: 'POST', headers: { authorization: `Basic ${Buffer.from(user).toString('base64')}`, ...CLOSING_CONNECTION.headers }, body: form });
  const { access_token: token } = (await issued.json()) as { access_token: string };
  const gateway = `http://127.0.0.1:${gatewayListening.port as number}`;
  expect((await client(gateway, { token }).post('/api/users', { email: 'npm-start-idp@example.com', name: 'Via the provider' })).status).toBe(201);
  // The development key is no longer trusted.
  const devToken = execFileSync(process.execPath, ['scripts/token.ts'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  expectProblem(await client(gateway, { token: devToken }).get('/api/users', CLOSING_CONNECTION), 401, 'unauthorized');

  process.kill(-npm.child.pid!, 'SIGINT');
  expect(await npm.exited).toEqual({ code: 0, signal: null });
  const { port } = new URL(issuer!);
  expect(await reaches('127.0.0.1', Number(port))).toBe(false);
}, 60_000);
