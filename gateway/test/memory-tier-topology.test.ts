import { EventEmitter } from 'node:events';
import { createLogger } from '@app/shared/platform/logger';
import type { Cluster } from 'ioredis';
import { MemoryTier, type NodeConnections } from '../src/cache/memory-tier.js';
import type { Redis } from '../src/redis.js';

/**
 * The memory tier on a cluster whose masters change, with connections that stand in for Redis's:
 * they answer what the tier sends, and close when told. A dropped master's connections may close
 * late, after the new topology is tracked: that must not turn the tier off.
 */
const logger = createLogger('memory-tier-topology-test', 'silent');

/** A connection that answers the tier's commands at once; `disconnect` emits its close on a later turn, as ioredis does. */
class FakeConnection extends EventEmitter {
  status = 'ready';
  readonly call = async (...args: string[]) => (args[0] === 'CLUSTER' ? `id-${this.node}` : 'OK');
  readonly client = async () => 1;
  readonly subscribe = async () => 3;
  readonly ping = async () => 'PONG';
  readonly publish = async () => 1;
  constructor(readonly node: string) {
    super();
  }
  disconnect(): void {
    this.status = 'end';
    setTimeout(() => this.emit('close'), 20);
  }
}

/** A cluster client that names `masters` as the owners of its slots, until told otherwise. */
class FakeCluster extends EventEmitter {
  slots: string[][] = [];
  disconnect(): void {
    this.emit('end');
  }
  name(masters: string[]): void {
    this.slots = Array.from({ length: 16 }, (_, i) => [masters[i % masters.length]!]);
    this.emit('refresh');
  }
}

async function turns(count = 5): Promise<void> {
  for (let i = 0; i < count; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('the memory tier on a cluster whose masters change', () => {
  let cluster: FakeCluster;
  let tier: MemoryTier;

  beforeEach(() => {
    cluster = new FakeCluster();
    const connect = (node: string): NodeConnections => ({ tracked: new FakeConnection(node) as unknown as Redis, subscriber: new FakeConnection(node) as unknown as Redis });
    tier = new MemoryTier({ cluster: cluster as unknown as Cluster, connect }, 1024 * 1024, logger);
  });
  afterEach(() => tier.close());

  it('tracks every master, and again after one is replaced, however late the old one’s connections close', async () => {
    cluster.name(['a:1', 'b:1']);
    await turns();
    expect(tier.tracking).toBe(true);
    cluster.name(['a:1', 'c:1']);
    await turns();
    expect(tier.tracking).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 50)); // b's connections have closed by now
    expect(tier.tracking).toBe(true);
  });

  it('tracks again when a master only goes, with no new one to announce itself', async () => {
    cluster.name(['a:1', 'b:1']);
    await turns();
    cluster.name(['a:1']);
    await turns();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(tier.tracking).toBe(true);
  });

  it('goes off when a master it tracks loses a connection', async () => {
    cluster.name(['a:1', 'b:1']);
    await turns();
    expect(tier.tracking).toBe(true);
    cluster.emit('close');
    expect(tier.tracking).toBe(false);
  });
});
