import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rm } from 'node:fs/promises';
import { createLogger } from '@app/shared/platform/logger';
import { createMemoryTier, type MemoryTier } from '../../src/cache/memory-tier.js';
import { createCacheClient, type Redis } from '../../src/redis/client.js';
import { freePort } from '../fixtures.js';

/**
 * The memory tier on a Redis Cluster of one master: a redis-server of the test's own, on a free
 * port, that announces an address nobody reaches (127.0.0.3). The tier reaches it as the natMaps
 * say: its cluster client and tracked connection on 127.0.0.2, its subscriber on 127.0.0.1. It
 * asks for a password, as a cluster's nodes may.
 */
const logger = createLogger('memory-tier-cluster-test', 'silent');
const keyPrefix = `tier-cluster-${randomBytes(4).toString('hex')}:`;
/** Every connection of the tier must log in (nodeCredentials). */
const password = randomBytes(8).toString('hex');


/** Polls `condition` every 10 ms; fails once `ms` have passed without it. */
async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 5_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

let port: number;
let server: ChildProcess;
let exited: Promise<unknown>;
let configFile: string;
let admin: Redis;
let tier: MemoryTier;

beforeAll(async () => {
  port = await freePort();
  configFile = join(tmpdir(), `memory-tier-cluster-${port}-${randomBytes(4).toString('hex')}.conf`);
  server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1 127.0.0.2', '--save', '', '--appendonly', 'no', '--cluster-enabled', 'yes', '--cluster-config-file', configFile, '--cluster-announce-ip', '127.0.0.3', '--requirepass', password],
    { stdio: 'ignore' },
  );
  exited = new Promise((resolve) => server.once('exit', resolve));
  admin = createCacheClient(`redis://:${password}@127.0.0.1:${port}`, logger, { keyPrefix });
  await until(() => admin.status === 'ready', 'the test’s redis-server listening');
  await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  await until(async () => String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'), 'the cluster serving every slot');

  const nodes = [{ host: '127.0.0.1', port }];
  const announced = `127.0.0.3:${port}`;
  // The subscriber must be placed by the address the master announces: by the tracked one's it would go nowhere.
  const nowhere = { host: '127.0.0.1', port: await freePort() };
  tier = createMemoryTier(
    {
      tracked: { nodes, password, natMap: { [announced]: { host: '127.0.0.2', port } } },
      subscriber: { nodes, password, natMap: { [announced]: { host: '127.0.0.1', port }, [`127.0.0.2:${port}`]: nowhere } },
    },
    1024 * 1024,
    logger,
    { keyPrefix },
  );
  await until(() => tier.tracking, 'the tier tracking the master');
});

afterAll(async () => {
  await tier?.close();
  admin?.disconnect();
  server?.kill('SIGKILL');
  await exited;
  await rm(configFile, { force: true });
});

it('learns a generation through its cluster client and forgets it when the master says it changed', async () => {
  const scope = { entryKey: 'c:{c1}:', generationKey: 'g:{c1}', holdKey: 'h:{c1}' };
  await admin.set(scope.generationKey, 'g1', 'EX', 60);
  const entry = { generation: 'g1', storedAt: 0, status: 200, headers: {}, body: Buffer.from('{}') };
  await until(() => {
    tier.learn(scope, entry);
    return tier.held(scope) !== undefined;
  }, 'the entry held');
  const heard: (readonly string[])[] = [];
  const stop = tier.onInvalidation((keys) => heard.push(keys));
  await admin.set(scope.generationKey, 'g2', 'EX', 60);
  await until(() => heard.length > 0, 'the invalidation heard', 2_000);
  stop();
  expect(heard[0]).toEqual([scope.generationKey]);
  expect(tier.held(scope)).toBeUndefined();
});

it('publishes its barrier on the master’s own channel, and hears its acknowledgement there', async () => {
  const id = String(await admin.call('CLUSTER', 'MYID'));
  const listener = createCacheClient(`redis://:${password}@127.0.0.1:${port}`, logger);
  try {
    const channels: string[] = [];
    listener.on('pmessage', (_pattern: string, channel: string) => channels.push(channel));
    await until(() => listener.status === 'ready', 'the listener connected');
    await listener.psubscribe(`${keyPrefix}gateway:barrier*`);
    await tier.barrier();
    await until(() => channels.length >= 2, 'the barrier and its acknowledgement seen', 2_000);
    expect(channels[0]).toBe(`${keyPrefix}gateway:barrier:${id}`);
    expect(channels[1]).toMatch(new RegExp(`^${keyPrefix}gateway:barrier-ack:[0-9a-f]{16}:${id}$`));
  } finally {
    listener.disconnect();
  }
});
