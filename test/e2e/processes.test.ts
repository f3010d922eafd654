/**
 * The real processes, as `npm start -w <workspace>` runs them: start-up, configuration errors,
 * migrations, and graceful shutdown with requests in flight.
 */
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import mysql from 'mysql2/promise';
import { DRAIN_IDLE_GRACE_MS } from '@app/shared/platform/server';
import { defaultToken, TEST_RULES, testPublicKeyPem } from '../support/auth.js';
import { client, CLOSING_CONNECTION, expectProblem } from '../support/http.js';
import { ROOT, run, startWorkspace, usersOnlyServicesFile, type RunningProcess } from '../../tools/process.js';
import { type KeptAliveConnection, keptAliveConnection, rawExchange, reaches, refusesConnections, requestBytes } from '../support/raw-socket.js';
import { throwawayDatabases } from '../support/stack.js';
import { closedPort } from '../../tools/tcp-proxy.js';

/** The gateway trusts the tests' key, so `client()`'s default token works with it. */
const GATEWAY_AUTH = { AUTH_PUBLIC_KEY: testPublicKeyPem, AUTH_ISSUER: TEST_RULES.issuer, AUTH_AUDIENCE: TEST_RULES.audience };

const databaseUrl = throwawayDatabases();

const USER = JSON.stringify({ email: 'in-flight@example.com', name: 'In Flight' });

/** A POST whose body is only half sent: the request is in flight until `finish()` sends the rest. */
function halfSentPost(url: string, path: string, body: string) {
  const { hostname, port } = new URL(url);
  const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${defaultToken}` };
  const request = http.request({ host: hostname, port, path, method: 'POST', headers });
  const response = new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    request.on('response', (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    request.on('error', reject);
  });
  request.write(body.slice(0, 10));
  return { response, finish: () => request.end(body.slice(10)) };
}

describe('npm start -w <workspace>', () => {
  it('runs the three processes with their config, and a client of the gateway can use the API', async () => {
    const npm = (workspace: string, env: Record<string, string>) => run('npm', ['start', '--silent', '-w', workspace], { PORT: '0', ...env });
    const listening = (line: Record<string, unknown>) => String(line.msg).endsWith('listening');
    const users = npm('users-service', { DATABASE_URL: databaseUrl('users') });
    const products = npm('products-service', { DATABASE_URL: databaseUrl('products') });
    const [usersPort, productsPort] = (await Promise.all([users.logged(listening), products.logged(listening)])).map((line) => line.port);
    const gateway = npm('gateway', { GATEWAY_UPSTREAMS: `users=http://127.0.0.1:${usersPort},products=http://127.0.0.1:${productsPort}`, LISTEN_SOCKETS: '8', ...GATEWAY_AUTH });
    const gatewayListening = await gateway.logged(listening);
    // LISTEN_SOCKETS (64 by default) listening sockets share the port on Linux, one elsewhere.
    expect(gatewayListening.listenSockets).toBe(process.platform === 'linux' ? 8 : 1);
    expect((await users.logged(listening)).listenSockets).toBe(process.platform === 'linux' ? 64 : 1);
    const api = client(`http://127.0.0.1:${gatewayListening.port}`);
    try {
      const user = await api.post('/api/users', { email: 'npm@example.com', name: 'Npm Start' });
      expect(user.status).toBe(201);
      expect((await api.get(user.headers.get('location')!)).body).toEqual(user.body);
      const product = await api.post('/api/products', { sku: 'NPM-1', name: 'Npm', price: { amount: '1.5', currency: 'EUR' } });
      expect(product.body.price).toEqual({ amount: '1.50', currency: 'EUR' });
      expect((await api.get('/readyz', CLOSING_CONNECTION)).status).toBe(200);
    } finally {
      for (const started of [gateway, users, products]) started.child.kill('SIGTERM');
    }
    // npm passes SIGTERM on and, once its child is done, re-raises it on itself: what counts is
    // that each process shut down cleanly.
    await Promise.all([gateway.exited, users.exited, products.exited]);
    for (const started of [gateway, users, products]) expect(started.lines).toContainEqual(expect.objectContaining({ msg: 'shutdown complete' }));
  });

  it('npm run migrate -w <service> applies the migrations and exits 0', async () => {
    const url = databaseUrl('migrate');
    const migrate = run('npm', ['run', '--silent', 'migrate', '-w', 'products-service'], { DATABASE_URL: url });
    expect((await migrate.exited).code).toBe(0);
    expect(migrate.lines).toContainEqual(expect.objectContaining({ migration: '0001_create_products.sql', msg: 'applying migration' }));
  });
});

describe('configuration', () => {
  it('stops the gateway with one message naming every bad variable', async () => {
    const gateway = run(process.execPath, ['gateway/dist/main.js'], {
      PORT: 'eighty',
      UPSTREAM_TIMEOUT_MS: '0',
      GATEWAY_UPSTREAMS: 'users=ftp://users',
      LOG_LEVEL: 'loud',
    });
    expect((await gateway.exited).code).toBe(1);
    const message = gateway.stderr();
    expect(message.match(/Invalid configuration/g)).toHaveLength(1);
    for (const name of ['PORT', 'UPSTREAM_TIMEOUT_MS', 'GATEWAY_UPSTREAMS', 'LOG_LEVEL']) expect(message).toContain(`${name}:`);
    expect(message).not.toContain('UPSTREAM_URL_TEMPLATE');
  });

  it('stops the gateway naming a service that services.json does not list', async () => {
    const gateway = run(process.execPath, ['gateway/dist/main.js'], { GATEWAY_UPSTREAMS: 'nothing=http://127.0.0.1:1', AUTH_PUBLIC_READS: 'users' });
    expect((await gateway.exited).code).toBe(1);
    expect(gateway.stderr()).toContain('GATEWAY_UPSTREAMS: nothing: no such service');
    expect(gateway.stderr()).toContain('AUTH_PUBLIC_READS: users: its reads may not be public');
  });

  it('stops a service with one message naming every bad variable', async () => {
    const users = run(process.execPath, ['users-service/dist/main.js'], { DATABASE_URL: 'postgres://db/users', MIGRATE_ON_START: 'maybe', SHUTDOWN_TIMEOUT_MS: '-1', LISTEN_SOCKETS: '0' });
    expect((await users.exited).code).toBe(1);
    for (const name of ['DATABASE_URL', 'MIGRATE_ON_START', 'SHUTDOWN_TIMEOUT_MS', 'LISTEN_SOCKETS']) expect(users.stderr()).toContain(`${name}:`);
  });

  it('does not start a service whose migrations cannot run, and says why', async () => {
    const users = run(process.execPath, ['users-service/dist/main.js'], { PORT: '0', DATABASE_URL: `mysql://root@127.0.0.1:${await closedPort()}/users` });
    expect((await users.exited).code).toBe(1);
    expect(users.lines).toContainEqual(expect.objectContaining({ level: 'fatal', msg: 'migrations failed; not starting' }));
  });

  it('starts without migrating when MIGRATE_ON_START=false, and is unready while its database is unreachable', async () => {
    const users = await startWorkspace('users-service', { MIGRATE_ON_START: 'false', DATABASE_URL: `mysql://root@127.0.0.1:${await closedPort()}/users` });
    try {
      const api = client(users.url);
      expect((await api.get('/healthz')).status).toBe(200);
      expectProblem(await api.get('/readyz'), 503, 'service-unavailable');
      expectProblem(await api.get('/api/users', CLOSING_CONNECTION), 503, 'service-unavailable');
    } finally {
      users.child.kill('SIGTERM');
    }
    expect((await users.exited).code).toBe(0);
  });
});

describe('shutdown on SIGTERM', () => {
  it('stops accepting, lets the in-flight request finish, closes the pool and exits 0', async () => {
    const users = await startWorkspace('users-service', { DATABASE_URL: databaseUrl('users') });
    const inFlight = halfSentPost(users.url, '/api/users', USER);
    expect((await client(users.url).get('/healthz', CLOSING_CONNECTION)).status).toBe(200); // the server has the in-flight request by now

    users.child.kill('SIGTERM');
    await users.logged((line) => line.msg === 'shutting down: draining in-flight requests');
    expect(await refusesConnections(users.port)).toBe(true);

    inFlight.finish();
    const response = await inFlight.response;
    expect(response.status).toBe(201);
    expect(response.headers.connection).toBe('close');
    expect(await users.exited).toEqual({ code: 0, signal: null });
    expect(users.lines).toContainEqual(expect.objectContaining({ msg: 'shutdown complete' }));
  });

  it('answers a request that completes during the drain, even one answered at once, with Connection: close, and exits 0', async () => {
    const users = await startWorkspace('users-service', { DATABASE_URL: databaseUrl('users') });
    // Half a request: the connection is busy, so the drain waits for it instead of closing it.
    const socket = net.connect(users.port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await new Promise<void>((resolve) => socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n', () => resolve()));
    expect((await client(users.url).get('/healthz', CLOSING_CONNECTION)).status).toBe(200); // the server has read the first half by now

    users.child.kill('SIGTERM');
    await users.logged((line) => line.msg === 'shutting down: draining in-flight requests');
    socket.write('\r\n');
    await closed;
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(received.toLowerCase()).toContain('connection: close');
    expect(await users.exited).toEqual({ code: 0, signal: null });
  });

  it('keeps idle kept-alive connections for the drain grace: a request on one is answered, not reset; readiness is 503; exits 0 once the grace closed the rest', async () => {
    const users = await startWorkspace('users-service', { DATABASE_URL: databaseUrl('users') });
    const connections = await Promise.all([1, 2, 3].map(() => keptAliveConnection(users.port)));
    const [reused, asksReadiness, silent] = connections as [KeptAliveConnection, KeptAliveConnection, KeptAliveConnection];
    // Kept alive after a first request; after SIGTERM one asks readiness, one sends again, one sends nothing.
    try {
      for (const connection of [reused, asksReadiness, silent]) expect((await connection.send(requestBytes('GET', '/healthz'))).headers.connection).toBe('keep-alive');
      const inFlight = halfSentPost(users.url, '/api/users', USER);
      // The server has the in-flight request by now; this connection closes after its answer.
      expect((await rawExchange(users.port, [requestBytes('GET', '/healthz', { Connection: 'close' })])).status).toBe(200);

      const signalledAt = performance.now();
      users.child.kill('SIGTERM');
      await users.logged((line) => line.msg === 'shutting down: draining in-flight requests');
      expect(await asksReadiness.send(requestBytes('GET', '/readyz'))).toMatchObject({ status: 503, headers: { connection: 'close' }, closed: true });
      expect(await reused.send(requestBytes('GET', '/healthz'))).toMatchObject({ status: 200, headers: { connection: 'close' }, closed: true });
      expect((await reused.ended).how).toBe('closed');
      inFlight.finish();
      expect(await inFlight.response).toMatchObject({ status: 201, headers: { connection: 'close' } });

      // The connection that never sent again is closed in order at the grace's end, not before.
      const silentEnd = await silent.ended;
      expect(silentEnd.how).toBe('closed');
      expect(silentEnd.at - signalledAt).toBeGreaterThanOrEqual(DRAIN_IDLE_GRACE_MS - 50);
      expect(await users.exited).toEqual({ code: 0, signal: null });
    } finally {
      for (const connection of connections) connection.destroy();
      users.child.kill('SIGKILL'); // gone already unless the test failed
    }
  });

  it('gives up on requests still in flight after SHUTDOWN_TIMEOUT_MS and exits 0', async () => {
    const users = await startWorkspace('users-service', { DATABASE_URL: databaseUrl('users'), SHUTDOWN_TIMEOUT_MS: '300' });
    const stuck = halfSentPost(users.url, '/api/users', USER);
    expect((await client(users.url).get('/healthz')).status).toBe(200);
    const cutOff = expect(stuck.response).rejects.toThrow('socket hang up');
    users.child.kill('SIGTERM');
    expect(await users.exited).toEqual({ code: 0, signal: null });
    await cutOff;
  });

  it('drains the gateway too: a proxied request in flight completes, and a clean stop warns of nothing', async () => {
    const users = await startWorkspace('users-service', { DATABASE_URL: databaseUrl('users') });
    const gateway = await startWorkspace('gateway', {
      GATEWAY_UPSTREAMS: `users=${users.url},products=http://127.0.0.1:${await closedPort()}`,
      REDIS_URL: process.env.TEST_REDIS_URL!,
      ...GATEWAY_AUTH,
    });
    try {
      await gateway.logged((line) => line.msg === 'redis tracks the cache generations: the in-memory cache is on');
      const inFlight = halfSentPost(gateway.url, '/api/users', USER);
      expect((await client(gateway.url).get('/healthz', CLOSING_CONNECTION)).status).toBe(200);
      gateway.child.kill('SIGINT');
      await gateway.logged((line) => line.msg === 'shutting down: draining in-flight requests');
      inFlight.finish();
      expect((await inFlight.response).status).toBe(201);
      expect(await gateway.exited).toEqual({ code: 0, signal: null });
      expect(gateway.lines.filter((line) => line.level === 'warn' || line.level === 'error').map((line) => line.msg)).toEqual([]);
    } finally {
      users.child.kill('SIGTERM');
      await users.exited;
    }
  });
});

/** Returns once an UPDATE is under way (waiting for a row lock), as another connection to `databaseUrl` sees it; within 4 s, or throws. */
async function untilUpdating(databaseUrl: string): Promise<void> {
  const connection = await mysql.createConnection(databaseUrl);
  try {
    for (const deadline = Date.now() + 4_000; Date.now() < deadline; ) {
      const [rows] = await connection.query("SELECT COUNT(*) AS updating FROM information_schema.PROCESSLIST WHERE info LIKE 'UPDATE %'");
      if (Number((rows as { updating: number }[])[0]?.updating) > 0) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error('no UPDATE came to wait for the row lock within 4 s');
  } finally {
    await connection.end();
  }
}

describe('npm start, stopped with a slow write in flight', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)('%s to every process of each, more than once (as Ctrl-C and a supervisor send it): the write is answered, and each logs "shutdown complete"', async (signal) => {
    const databaseUrl_ = databaseUrl('slow-write');
    const users = run('npm', ['start', '--silent', '-w', 'users-service'], { PORT: '0', DATABASE_URL: databaseUrl_ }, undefined, { ownGroup: true });
    const usersUrl = `http://127.0.0.1:${(await users.logged((line) => String(line.msg).endsWith('listening'))).port as number}`;
    const gateway = run('npm', ['start', '--silent', '-w', 'gateway'], { PORT: '0', GATEWAY_UPSTREAMS: `users=${usersUrl},products=http://127.0.0.1:${await closedPort()}`, ...GATEWAY_AUTH }, undefined, { ownGroup: true });
    const gatewayUrl = `http://127.0.0.1:${(await gateway.logged((line) => String(line.msg).endsWith('listening'))).port as number}`;
    const lock = await mysql.createConnection(databaseUrl_);
    try {
      const created = await client(gatewayUrl).post('/api/users', { email: `slow-${signal}@example.com`, name: 'Slow' });
      expect(created.status).toBe(201);
      // The write waits in users-service for the row this transaction holds.
      await lock.query('START TRANSACTION');
      await lock.query('SELECT id FROM users WHERE email = ? FOR UPDATE', [`slow-${signal}@example.com`]);
      const write = client(gatewayUrl).patch(created.headers.get('location')!, { name: 'Answered' });
      await untilUpdating(databaseUrl_);
      for (const started of [users, gateway]) {
        process.kill(-started.child.pid!, signal);
        process.kill(-started.child.pid!, signal);
      }
      await Promise.all([users, gateway].map((started) => started.logged((line) => line.msg === 'shutting down: draining in-flight requests')));
      await lock.query('COMMIT');
      const answered = await write;
      expect([answered.status, answered.body?.name]).toEqual([200, 'Answered']);
      for (const started of [users, gateway]) {
        await started.exited;
        expect(started.lines.filter((line) => line.msg === 'shutdown complete')).toHaveLength(1);
      }
    } finally {
      await lock.end();
      // Whatever is left of either group (nothing, when the test passed: ESRCH).
      for (const started of [users, gateway]) {
        try {
          process.kill(-started.child.pid!, 'SIGKILL');
        } catch {
          // the group has exited
        }
      }
    }
  });
});

/** The process groups of `pid` and of all its descendants (`npm start` gives each command a group of its own). */
function processGroupsUnder(pid: number): Set<number> {
  const table = execFileSync('ps', ['-e', '-o', 'pid=,ppid=,pgid='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((row) => row.trim().split(/\s+/).map(Number) as [number, number, number]);
  const tree = new Set([pid]);
  for (let grown = true; grown; ) {
    grown = false;
    for (const [child, parent] of table) {
      if (tree.has(parent) && !tree.has(child)) {
        tree.add(child);
        grown = true;
      }
    }
  }
  return new Set(table.filter(([member]) => tree.has(member)).map(([, , group]) => group));
}

describe('npm start (the whole system), stopped with a slow write in flight', () => {
  // Ctrl-C: the terminal signals npm's whole process group. A supervisor signals npm alone.
  const stops = [
    ['SIGINT', 'Ctrl-C', (npm: RunningProcess) => process.kill(-npm.child.pid!, 'SIGINT')],
    ['SIGTERM', 'a supervisor', (npm: RunningProcess) => process.kill(npm.child.pid!, 'SIGTERM')],
  ] as const;
  // Whatever is left of npm's group or the commands' own (nothing, when the test passed), even
  // after a test that timed out.
  const groups = new Set<number>();
  afterEach(() => {
    for (const group of groups) {
      try {
        process.kill(-group, 'SIGKILL');
      } catch {
        // the group has exited
      }
    }
    groups.clear();
  });
  it.each(stops)('%s (as %s sends it): the write is answered, each process gets the signal once and logs "shutdown complete"', async (signal, _sender, stop) => {
    const databaseUrl_ = databaseUrl('npm-start');
    const env = { SERVICES_FILE: await usersOnlyServicesFile(), DATABASE_URL: databaseUrl_, REDIS_URL: process.env.TEST_REDIS_URL!, PORT: String(await closedPort()) };
    const npm = run('npm', ['start', '--silent'], env, undefined, { ownGroup: true });
    groups.add(npm.child.pid!);
    const listening = (service: string) => (line: Record<string, unknown>) => line.service === service && String(line.msg).endsWith('listening');
    const [gatewayListening] = await Promise.all([npm.logged(listening('gateway')), npm.logged(listening('users-service'))]);
    for (const group of processGroupsUnder(npm.child.pid!)) groups.add(group);
    // It trusts a key whose private half is published: on loopback alone, its metrics too.
    const gatewayPorts = [gatewayListening.port as number, gatewayListening.metricsPort as number];
    expect(await Promise.all(gatewayPorts.flatMap((port) => [reaches('127.0.0.1', port), reaches('127.0.0.2', port)]))).toEqual([true, false, true, false]);
    // npm start trusts the development key: a token of `npm run token`, as a user gets one.
    const token = execFileSync(process.execPath, ['scripts/token.ts'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const api = client(`http://127.0.0.1:${gatewayListening.port as number}`, { token });
    const lock = await mysql.createConnection(databaseUrl_);
    try {
      const created = await api.post('/api/users', { email: `npm-start-${signal}@example.com`, name: 'Slow' });
      expect(created.status).toBe(201);
      await lock.query('START TRANSACTION');
      await lock.query('SELECT id FROM users WHERE email = ? FOR UPDATE', [`npm-start-${signal}@example.com`]);
      const write = api.patch(created.headers.get('location')!, { name: 'Answered' });
      await untilUpdating(databaseUrl_);
      stop(npm);
      await Promise.all(['gateway', 'users-service'].map((service) => npm.logged((line) => line.service === service && line.msg === 'shutting down: draining in-flight requests')));
      await lock.query('COMMIT');
      const answered = await write;
      expect([answered.status, answered.body?.name]).toEqual([200, 'Answered']);
      expect(await npm.exited).toEqual({ code: 0, signal: null });
      for (const service of ['gateway', 'users-service']) {
        const said = npm.lines.filter((line) => line.service === service).map((line) => line.msg);
        expect([service, said.filter((msg) => msg === 'shutdown complete' || msg === 'already shutting down: signal ignored')]).toEqual([service, ['shutdown complete']]);
      }
    } finally {
      await lock.end();
    }
    // npm start builds first (tsc -b, with nothing to do), then starts four processes.
  }, 60_000);
});

/** A connection to `port` that sends `bytes` (nothing, by default) and then waits: what the server sent once it closed it. */
function idleConnection(port: number, bytes = ''): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(received));
  });
}

describe('connections that send no request', () => {
  it('are closed REQUEST_HEAD_TIMEOUT_MS after accept (a partial head with a 408), counted and logged; one that sent a request is left open', async () => {
    const nowhere = `http://127.0.0.1:${await closedPort()}`;
    const gateway = await startWorkspace('gateway', { UPSTREAM_URL_TEMPLATE: nowhere, REQUEST_HEAD_TIMEOUT_MS: '300', LISTEN_SOCKETS: '2', ...GATEWAY_AUTH });
    const products = await startWorkspace('products-service', { DATABASE_URL: databaseUrl('silent'), REQUEST_HEAD_TIMEOUT_MS: '300', LISTEN_SOCKETS: '2' });
    // Opened first, and its request sent at once: its own deadline would have passed by the time the others close.
    const busy = net.connect(gateway.port, '127.0.0.1', () => busy.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
    const answered = new Promise((resolve) => busy.once('data', resolve));
    try {
      await answered;
      const [silentGateway, silentProducts, partial] = await Promise.all([idleConnection(gateway.port), idleConnection(products.port), idleConnection(gateway.port, 'GET /healthz HT')]);
      expect({ silentGateway, silentProducts, partial: partial.split('\r\n', 1)[0] }).toEqual({ silentGateway: '', silentProducts: '', partial: 'HTTP/1.1 408 Request Timeout' });
      expect(busy.destroyed).toBe(false);
      const metrics = await (await fetch(`${gateway.metricsUrl}/metrics`)).text();
      expect(metrics).toMatch(/^gateway_connections_without_request_closed_total 2$/m);
      await gateway.logged((line) => line.msg === 'closed connections that sent no request in time' && line.closed === 1);
      await products.logged((line) => line.msg === 'closed connections that sent no request in time' && line.closed === 1);
    } finally {
      busy.destroy();
      gateway.child.kill('SIGTERM');
      products.child.kill('SIGTERM');
    }
    await Promise.all([gateway.exited, products.exited]);
  });
});
