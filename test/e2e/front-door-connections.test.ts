/**
 * Connections held open, as an outside probe held them: against the real gateway process, on its
 * API port and its metrics port. Each connection has a budget for its whole life, and room is
 * capped per peer address and in all (small budgets and caps here, set by their variables).
 */
import { METRICS_MAX_CONNECTIONS } from '@app/shared/platform/server';
import { closedPort } from '../../tools/tcp-proxy.js';
import { TEST_RULES, testPublicKeyPem } from '../support/auth.js';
import { refused, served, statusLines, trickled } from '../support/held-connections.js';
import { startWorkspace } from '../../tools/process.js';

let gateway: Awaited<ReturnType<typeof startWorkspace>>;
let metricsPort: number;

beforeAll(async () => {
  gateway = await startWorkspace('gateway', {
    UPSTREAM_URL_TEMPLATE: `http://127.0.0.1:${await closedPort()}`,
    AUTH_PUBLIC_KEY: testPublicKeyPem,
    AUTH_ISSUER: TEST_RULES.issuer,
    AUTH_AUDIENCE: TEST_RULES.audience,
    REQUEST_HEAD_TIMEOUT_MS: '200',
    REQUEST_BODY_TIMEOUT_MS: '200',
    MAX_CONNECTIONS_PER_ADDRESS: '2',
    MAX_CONNECTIONS: '3',
    LISTEN_SOCKETS: '2',
  });
  metricsPort = Number(new URL(gateway.metricsUrl!).port);
});
afterAll(async () => {
  gateway.child.kill('SIGTERM');
  await gateway.exited;
});

it('API port: a second request head trickled after GET /healthz is closed within REQUEST_HEAD_TIMEOUT_MS, with a 408', async () => {
  const received = await trickled(gateway.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 'GET /healthz HTTP/1.1\r\nX-Slow: ', 'a');
  expect(statusLines(received)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 408 Request Timeout']);
});

it('metrics port: a body trickled after its 405 is cut off within the budget, with nothing more sent', async () => {
  const received = await trickled(metricsPort, 'POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n', '', 'a');
  expect(statusLines(received)).toEqual(['HTTP/1.1 405 Method Not Allowed']);
});

it('refuses the connection over MAX_CONNECTIONS_PER_ADDRESS from one address, then the one over MAX_CONNECTIONS from any', async () => {
  const held = [await served(gateway.port, '127.0.0.1'), await served(gateway.port, '127.0.0.1')];
  try {
    expect(await refused(gateway.port, '127.0.0.1')).toBe(true);
    held.push(await served(gateway.port, '127.0.0.2'));
    expect(await refused(gateway.port, '127.0.0.3')).toBe(true);
  } finally {
    for (const socket of held) socket.destroy();
  }
});

describe('the metrics port, with the default MAX_CONNECTIONS', () => {
  let defaults: Awaited<ReturnType<typeof startWorkspace>>;
  beforeAll(async () => {
    defaults = await startWorkspace('gateway', { UPSTREAM_URL_TEMPLATE: `http://127.0.0.1:${await closedPort()}`, AUTH_ENABLED: 'false', LISTEN_SOCKETS: '1' });
  });
  afterAll(async () => {
    defaults.child.kill('SIGTERM');
    await defaults.exited;
  });

  it(`holds at most ${METRICS_MAX_CONNECTIONS} connections: its only clients are scrapers`, async () => {
    const port = Number(new URL(defaults.metricsUrl!).port);
    const held: Awaited<ReturnType<typeof served>>[] = [];
    try {
      for (let i = 0; i < METRICS_MAX_CONNECTIONS; i++) held.push(await served(port, '127.0.0.1'));
      expect(await refused(port, '127.0.0.2')).toBe(true);
      expect(await refused(defaults.port, '127.0.0.2')).toBe(false);
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});
