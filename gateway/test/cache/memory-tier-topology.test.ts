import { EventEmitter } from 'node:events';
import { createLogger } from '@app/shared/platform/logger';
import type { Cluster } from 'ioredis';
import { MemoryTier } from '../../src/cache/memory-tier.js';
import type { NodeConnections } from '../../src/cache/memory-tier/node-tracking.js';
import type { Redis } from '../../src/redis/client.js';

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
  readonly subscribed: string[][] = [];
  readonly subscribe = async (...channels: string[]) => this.subscribed.push(channels);
  ping = async () => 'PONG';
  readonly published: [string, string][] = [];
  readonly publish = async (channel: string, message: string) => this.published.push([channel, message]) && 1;
  constructor(readonly node: string) {
    super();
  }
  disconnect(): void {
    this.status = 'end';
    setTimeout(() => this.emit('close'), 20);
  }
  /** Redis sends `message` on `channel`. */
  message(channel: string, message: string): void {
    this.emit('messageBuffer', Buffer.from(channel), Buffer.from(message));
  }
}

/** A cluster client that names `masters` as the owners of its slots, until told otherwise. */
class FakeCluster extends EventEmitter {
  slots: string[][] = [];
  disconnected = false;
  disconnect(): void {
    this.disconnected = true;
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

/** A tier on a fake cluster whose connections record what the tier asks of them. */
function recordingTier() {
  const cluster = new FakeCluster();
  const connections = new Map<string, { tracked: FakeConnection; subscriber: FakeConnection }>();
  const connect = (node: string): NodeConnections => {
    const pair = { tracked: new FakeConnection(node), subscriber: new FakeConnection(node) };
    connections.set(node, pair);
    return pair as unknown as NodeConnections;
  };
  const tier = new MemoryTier({ cluster: cluster as unknown as Cluster, connect }, 1024 * 1024, logger, 'p:');
  return { cluster, connections, tier };
}

/** Holds an entry of `tag` (its generation learnt as a lookup does), then waits for the lease. */
async function holdEntry(tier: MemoryTier, tag: string) {
  const scope = { entryKey: `c:{${tag}}:`, generationKey: `g:{${tag}}`, holdKey: `h:{${tag}}` };
  tier.learnGeneration(tier.watch(scope)!, 'g1');
  tier.learn(scope, { generation: 'g1', storedAt: 0, status: 200, headers: {}, body: Buffer.from('x') });
  tier.held(scope);
  await turns();
  return scope;
}

describe('the memory tier on each master of a cluster', () => {
  const tiers: MemoryTier[] = [];
  const make = () => {
    const made = recordingTier();
    tiers.push(made.tier);
    return made;
  };
  afterEach(async () => {
    for (const tier of tiers.splice(0)) await tier.close();
  });

  it('names each master’s channels after its node id, and publishes a barrier on every master', async () => {
    const { cluster, connections, tier } = make();
    cluster.name(['a:1', 'b:1']);
    await turns();
    const a = connections.get('a:1')!;
    expect(a.subscriber.subscribed[0]!.slice(0, 2)).toEqual(['__redis__:invalidate', 'p:gateway:barrier:id-a:1']);
    expect(a.subscriber.subscribed[0]![2]).toMatch(/^p:gateway:barrier-ack:[0-9a-f]{16}:id-a:1$/);
    void tier.barrier();
    await turns();
    expect(a.tracked.published.map(([channel]) => channel)).toEqual(['p:gateway:barrier:id-a:1']);
    expect(connections.get('b:1')!.tracked.published.map(([channel]) => channel)).toEqual(['p:gateway:barrier:id-b:1']);
  });

  it('resolves a barrier once every master’s subscribers acknowledged it there', async () => {
    const { cluster, connections, tier } = make();
    cluster.name(['a:1', 'b:1']);
    await turns();
    let done = false;
    const barrier = tier.barrier().then(() => (done = true));
    await turns();
    for (const node of ['a:1', 'b:1']) {
      const { subscriber, tracked } = connections.get(node)!;
      expect(done).toBe(false);
      const [, message] = tracked.published[0]!;
      const [ack, nonce] = message.split(' ');
      subscriber.message(ack!, nonce!);
      await turns();
    }
    // Well before its 250 ms are out.
    expect(done).toBe(true);
    await barrier;
  });

  it('waits out a barrier when no master is known yet', async () => {
    const { tier } = make();
    const started = performance.now();
    await tier.barrier();
    expect(performance.now() - started).toBeGreaterThanOrEqual(240);
  });

  it('keeps what it holds while the masters stay the same, whatever else the slots say', async () => {
    const { cluster, tier } = make();
    cluster.name(['a:1', 'b:1']);
    await turns();
    const scope = await holdEntry(tier, 'x');
    expect(tier.held(scope)).toBeDefined();
    cluster.slots = [['b:1', 'replica:1'], undefined as unknown as string[], [], ['a:1']];
    cluster.emit('refresh');
    expect(tier.held(scope)).toBeDefined();
    cluster.name(['a:1', 'c:1']);
    expect(tier.held(scope)).toBeUndefined();
  });

  it('drops everything when the masters change, even to as many others', async () => {
    const { cluster, connections, tier } = make();
    cluster.name(['a:1', 'b:1']);
    await turns();
    const scope = await holdEntry(tier, 'x');
    cluster.name(['c:1', 'd:1']);
    expect(tier.held(scope)).toBeUndefined();
    // A master that stays keeps its connections.
    const c = connections.get('c:1')!;
    cluster.name(['c:1', 'e:1']);
    expect(connections.get('c:1')).toBe(c);
    expect(c.tracked.status).toBe('ready');
    expect(connections.get('a:1')!.tracked.status).toBe('end');
    expect(connections.get('a:1')!.subscriber.status).toBe('end');
    expect(connections.get('c:1')!.tracked.status).toBe('ready');
    await turns();
    expect(tier.tracking).toBe(true);
  });

  it('is off with no master at all, and tracks once every master does', async () => {
    const { cluster, connections, tier } = make();
    cluster.name(['a:1']);
    await turns();
    cluster.slots = [];
    cluster.emit('refresh');
    await turns();
    expect(tier.tracking).toBe(false);
    connections.clear();
    cluster.name(['a:1', 'b:1']);
    expect(tier.tracking).toBe(false);
    await turns();
    expect(tier.tracking).toBe(true);
  });

  it('needs a lease from every master to serve', async () => {
    const { cluster, connections, tier } = make();
    cluster.name(['a:1', 'b:1']);
    await turns();
    const b = connections.get('b:1')!.subscriber;
    let pong: (() => void) | undefined;
    b.ping = () => new Promise<string>((resolve) => (pong = () => resolve('PONG')));
    const scope = await holdEntry(tier, 'x');
    expect(tier.held(scope)).toBeUndefined();
    pong!();
    await turns();
    expect(tier.held(scope)).toBeDefined();
  });

  it('follows the masters on every event the cluster client announces them with, and no more once closed', async () => {
    const { cluster, connections, tier } = make();
    for (const [event, node] of [
      ['ready', 'a:1'],
      ['+node', 'b:1'],
      ['-node', 'c:1'],
      ['refresh', 'd:1'],
    ] as const) {
      cluster.slots = [[node]];
      cluster.emit(event);
      expect(connections.has(node)).toBe(true);
    }
    await tier.close();
    expect(cluster.disconnected).toBe(true);
    expect(connections.get('d:1')!.subscriber.status).toBe('end');
    cluster.slots = [['e:1']];
    cluster.emit('refresh');
    cluster.emit('close');
    expect(connections.has('e:1')).toBe(false);
  });

  it('survives the cluster client’s errors', async () => {
    const { cluster, tier } = make();
    cluster.name(['a:1']);
    await turns();
    cluster.emit('error', new Error('ECONNREFUSED'));
    cluster.emit('error', new Error('ECONNREFUSED'));
    expect(tier.tracking).toBe(true);
  });
});
