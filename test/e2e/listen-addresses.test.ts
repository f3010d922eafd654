/**
 * Where each process listens, and the development key: a service trusts the subject header from
 * whoever reaches it, and the development key's private half is published, so each listens on
 * loopback unless HOST says otherwise, and the gateway refuses the development key elsewhere unless
 * AUTH_ALLOW_DEV_KEY says so.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TEST_RULES, testPublicKeyPem } from '../support/auth.js';
import { ROOT, run, startWorkspace } from '../../tools/process.js';
import { reaches } from '../support/raw-socket.js';
import { throwawayDatabases } from '../support/stack.js';

const databaseUrl = throwawayDatabases();

/** The gateway trusts the tests' key. */
const GATEWAY_AUTH = { AUTH_PUBLIC_KEY: testPublicKeyPem, AUTH_ISSUER: TEST_RULES.issuer, AUTH_AUDIENCE: TEST_RULES.audience };
/** The development key, as `npm start` gives it. */
const DEV_KEY = readFileSync(path.join(ROOT, 'dev-keys', 'public-key.jwk'), 'utf8').trim();

type Started = Awaited<ReturnType<typeof startWorkspace>>;
const metricsPortOf = (gateway: Started) => Number(new URL(gateway.metricsUrl!).port);

async function stop(...started: Started[]): Promise<void> {
  for (const one of started) one.child.kill('SIGTERM');
  await Promise.all(started.map((one) => one.exited));
}

it('a service and the gateway, its metrics too, on 127.0.0.1 unless HOST (METRICS_HOST) says otherwise', async () => {
  const loopback = await startWorkspace('products-service', { DATABASE_URL: databaseUrl('loopback') });
  const everywhere = await startWorkspace('products-service', { DATABASE_URL: databaseUrl('everywhere'), HOST: '0.0.0.0' });
  const gateway = await startWorkspace('gateway', { UPSTREAM_URL_TEMPLATE: loopback.url, ...GATEWAY_AUTH });
  const exposed = await startWorkspace('gateway', { UPSTREAM_URL_TEMPLATE: loopback.url, HOST: '0.0.0.0', METRICS_HOST: '0.0.0.0', ...GATEWAY_AUTH });
  try {
    const other = (port: number) => reaches('127.0.0.2', port);
    expect({
      service: [await reaches('127.0.0.1', loopback.port), await other(loopback.port)],
      configured: await other(everywhere.port),
      gateway: [await reaches('127.0.0.1', gateway.port), await other(gateway.port), await reaches('127.0.0.1', metricsPortOf(gateway)), await other(metricsPortOf(gateway))],
      configuredGateway: [await other(exposed.port), await other(metricsPortOf(exposed))],
    }).toEqual({ service: [true, false], configured: true, gateway: [true, false, true, false], configuredGateway: [true, true] });
  } finally {
    await stop(loopback, everywhere, gateway, exposed);
  }
});

it('the gateway refuses the development key on an address other machines reach, in one line naming the variable, unless AUTH_ALLOW_DEV_KEY=true', async () => {
  const refused = run(process.execPath, ['gateway/dist/main.js'], { PORT: '0', HOST: '0.0.0.0', AUTH_PUBLIC_KEY: DEV_KEY });
  expect((await refused.exited).code).toBe(1);
  expect(refused.stderr().split('\n').filter((line) => line.includes('AUTH_PUBLIC_KEY'))).toEqual([expect.stringMatching(/^ {2}- AUTH_PUBLIC_KEY: the development key .*HOST=0\.0\.0\.0.*AUTH_ALLOW_DEV_KEY=true$/)]);
  const onLoopback = await startWorkspace('gateway', { AUTH_PUBLIC_KEY: DEV_KEY });
  const allowed = await startWorkspace('gateway', { HOST: '0.0.0.0', AUTH_PUBLIC_KEY: DEV_KEY, AUTH_ALLOW_DEV_KEY: 'true' });
  await stop(onLoopback, allowed);
});
