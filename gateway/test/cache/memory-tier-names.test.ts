import { mastersOf } from '../../src/cache/memory-tier/cluster-topology.js';
import { nodeChannels } from '../../src/cache/memory-tier/node-tracking.js';
import { addressOf } from '../../src/cache/memory-tier/tracking-connections.js';
import { barrierChannels } from '../../src/cache/memory-tier/write-barrier.js';

/** How the memory tier names the nodes it tracks and the channels of its barriers. */
describe('node addresses', () => {
  it('read a node key as its host and port, an IPv6 host colons and all', () => {
    expect(addressOf('127.0.0.1:7000')).toEqual({ host: '127.0.0.1', port: 7000 });
    expect(addressOf('::1:7001')).toEqual({ host: '::1', port: 7001 });
  });

  it('name each master of a cluster once: the first node of each slot', () => {
    const slots = [['a:1', 'r:1'], ['b:1'], undefined, [], ['a:1'], ['r:2', 'b:1']];
    expect([...mastersOf(slots)]).toEqual(['a:1', 'b:1', 'r:2']);
    expect(mastersOf([]).size).toBe(0);
  });
});

describe('barrier channels', () => {
  it('are shared for the barrier and the tier’s own for its acknowledgements, after the key prefix', () => {
    expect(barrierChannels('p:', 'tier-1')).toEqual({ barrier: 'p:gateway:barrier', ack: 'p:gateway:barrier-ack:tier-1' });
  });

  it('carry the node id on a cluster', () => {
    expect(nodeChannels({ barrier: 'b', ack: 'a' }, 'n1')).toEqual({ barrier: 'b:n1', ack: 'a:n1' });
  });
});
