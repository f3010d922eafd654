import { jest } from '@jest/globals';
import { EventEmitter } from 'node:events';
import type { Logger } from '@app/shared/platform/logger';
import type { Cluster } from 'ioredis';
import { followTopology } from '../../src/cache/memory-tier/cluster-topology.js';
import type { TrackedNodes } from '../../src/cache/memory-tier/tracked-nodes.js';

/** Following a cluster's masters, with a cluster client, nodes, tier and logger that record what they are told. */
function following(knownAlready = false) {
  const cluster = Object.assign(new EventEmitter(), { slots: [['a:1', 'r:1'], ['b:1']] });
  const kept: Set<string>[] = [];
  const nodes = { are: () => knownAlready, keepOnly: (keys: Set<string>) => kept.push(keys) };
  const resets: string[] = [];
  let trackingOn = 0;
  const logger = { info: jest.fn(), warn: jest.fn() };
  const unfollow = followTopology(
    { cluster: cluster as unknown as Cluster, connect: () => undefined as never },
    nodes as unknown as TrackedNodes,
    { reset: (reason) => resets.push(reason), trackingOn: () => (trackingOn += 1) },
    logger as unknown as Logger,
  );
  return { cluster, kept, resets, logger, unfollow, trackingOn: () => trackingOn };
}

afterEach(() => jest.useRealTimers());

it.each(['ready', 'refresh', '+node', '-node'])('follows new masters on %s: reset, kept, logged, tracking asked for', (event) => {
  const { cluster, kept, resets, logger, trackingOn } = following();
  cluster.emit(event);
  expect(resets).toEqual(['the cluster topology changed']);
  expect(kept).toEqual([new Set(['a:1', 'b:1'])]);
  expect(logger.info).toHaveBeenCalledWith({ masters: ['a:1', 'b:1'] }, expect.stringMatching(/tracks the cluster masters/));
  expect(trackingOn()).toBe(1);
});

it('leaves the tier alone when the masters are the ones it tracks', () => {
  const { cluster, kept, resets, trackingOn } = following(true);
  cluster.emit('refresh');
  expect([kept, resets, trackingOn()]).toEqual([[], [], 0]);
});

it('resets the tier when the cluster client loses its connections, and stops following when told', () => {
  const { cluster, kept, resets, unfollow } = following();
  cluster.emit('close');
  expect(resets).toEqual(['the cluster client lost its connections']);
  unfollow();
  cluster.emit('close');
  cluster.emit('refresh');
  expect(resets).toHaveLength(1);
  expect(kept).toEqual([]);
});

it('logs the cluster client’s errors once a minute at most', () => {
  jest.useFakeTimers({ now: 0 });
  const { cluster, logger } = following();
  const error = new Error('connect ECONNREFUSED');
  cluster.emit('error', error);
  expect(logger.warn).toHaveBeenCalledTimes(1);
  expect(logger.warn).toHaveBeenLastCalledWith({ err: error }, expect.stringMatching(/reported an error/));
  jest.advanceTimersByTime(59_999);
  cluster.emit('error', error);
  expect(logger.warn).toHaveBeenCalledTimes(1);
  jest.advanceTimersByTime(1);
  cluster.emit('error', error);
  expect(logger.warn).toHaveBeenCalledTimes(2);
});
