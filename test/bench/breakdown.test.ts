/**
 * The grouping of `npm run bench:breakdown` (bench/breakdown.ts): which group a profile node's self
 * time counts to, and the self time of a profile's samples by group within the measured runs.
 */
import { bytesByGroup, groupOf, IDLE, rows, selfTimeByGroup, type AllocationNode, type CpuProfile } from '../../bench/breakdown.ts';

/** The file URL `--cpu-prof` gives a script of this checkout (made here: a URL literal reads as a comment to test/docs/comment-paths.test.ts). */
const file = (relative: string) => new URL(relative, 'file:/work/main/').href;

describe('groupOf', () => {
  test.each([
    ['(idle)', '', IDLE],
    ['(garbage collector)', '', 'GC'],
    ['(program)', '', '(program)'],
    ['(root)', '', 'other'],
    ['enforce', file('gateway/dist/stages/auth.js'), 'gateway: stages/auth'],
    ['verify', file('gateway/dist/auth/tokens.js'), 'gateway: auth/tokens'],
    ['send', file('gateway/dist/service-hop.js'), 'gateway: service-hop'],
    ['observeResponse', file('shared/dist/platform/http/observation.js'), 'shared: platform/http/observation'],
    ['observeResponse', file('node_modules/@app/shared/dist/platform/http/observation.js'), 'shared: platform/http/observation'],
    ['middleware', file('node_modules/http-proxy-middleware/dist/http-proxy-middleware.js'), 'http-proxy-middleware + httpxy'],
    ['web', file('node_modules/httpxy/dist/index.mjs'), 'http-proxy-middleware + httpxy'],
    ['observe', file('node_modules/prom-client/lib/histogram.js'), 'npm: prom-client'],
    ['x', file('node_modules/@opentelemetry/api/build/src/api/trace.js'), 'npm: @opentelemetry/api'],
    ['x', file('node_modules/some-lib/gateway/dist/index.js'), 'npm: some-lib'],
    ['handler', file('bench/servers/hpm-proxy.ts'), 'bench: servers/hpm-proxy.ts'],
    ['request', 'node:_http_client', 'node: http client'],
    ['addRequest', 'node:_http_agent', 'node: http client'],
    ['parserOnIncoming', 'node:_http_server', 'node: http server + messages'],
    ['writeHead', 'node:_http_outgoing', 'node: http server + messages'],
    ['_addHeaderLines', 'node:_http_incoming', 'node: http server + messages'],
    ['parserOnHeadersComplete', 'node:_http_common', 'node: http server + messages'],
    ['Readable.push', 'node:internal/streams/readable', 'node: streams'],
    ['Socket._writeGeneric', 'node:net', 'node: net'],
    ['writevGeneric', 'node:internal/stream_base_commons', 'node: net'],
    ['emit', 'node:events', 'node: events'],
    ['processTicksAndRejections', 'node:internal/process/task_queues', 'node: timers + ticks'],
    ['listOnTimeout', 'node:internal/timers', 'node: timers + ticks'],
    ['URL', 'node:internal/url', 'node: other internals'],
    ['writev', '', undefined],
    ['JSON.stringify', '', undefined],
    ['anything', new URL('/somewhere/else.js', 'file:/').href, 'other'],
  ])('%s in %s: %s', (functionName, url, group) => {
    expect(groupOf(functionName, url)).toBe(group);
  });
});

describe('selfTimeByGroup', () => {
  // (root) → listOnTimeout (node:internal/timers) → enforce (gateway stages/auth) → writev (native)
  //        → (idle), (garbage collector)
  const profile: CpuProfile = {
    nodes: [
      { id: 1, callFrame: { functionName: '(root)', url: '' }, children: [2, 5, 6] },
      { id: 2, callFrame: { functionName: 'listOnTimeout', url: 'node:internal/timers' }, children: [3] },
      { id: 3, callFrame: { functionName: 'enforce', url: file('gateway/dist/stages/auth.js') }, children: [4] },
      { id: 4, callFrame: { functionName: 'writev', url: '' } },
      { id: 5, callFrame: { functionName: '(idle)', url: '' } },
      { id: 6, callFrame: { functionName: '(garbage collector)', url: '' } },
    ],
    startTime: 1_000,
    endTime: 2_000,
    // Samples at 1100, 1200, 1300, 1400, 1500, 1600, 1700, 1800; the last lasts until endTime.
    samples: [2, 3, 4, 5, 6, 3, 2, 4],
    timeDeltas: [100, 100, 100, 100, 100, 100, 100, 100],
  };

  test('counts each sample until the next one, native frames to their caller, idle left out', () => {
    const times = selfTimeByGroup(profile, [{ from: 0, to: 10_000 }]);
    expect(Object.fromEntries(times)).toEqual({
      'node: timers + ticks': 200,
      'gateway: stages/auth': 200 + 100 + 200, // enforce twice, writev once (100) and last (200, to endTime)
      GC: 100,
    });
  });

  test('counts only the samples taken within the windows', () => {
    const times = selfTimeByGroup(profile, [
      { from: 1_100, to: 1_200 },
      { from: 1_500, to: 1_700 },
    ]);
    expect(Object.fromEntries(times)).toEqual({ 'node: timers + ticks': 100, GC: 100, 'gateway: stages/auth': 100 });
  });

  test('a native frame with no caller that has a script counts as other', () => {
    const orphan: CpuProfile = { ...profile, nodes: [{ id: 1, callFrame: { functionName: 'writev', url: '' } }], samples: [1], timeDeltas: [100], endTime: 1_150 };
    expect(Object.fromEntries(selfTimeByGroup(orphan, [{ from: 0, to: 10_000 }]))).toEqual({ other: 50 });
  });
});

test('rows: every group of either side, the difference, largest first by the gateway', () => {
  expect(rows({ a: 3, b: 10 }, { b: 4, c: 1 })).toEqual([
    { group: 'b', gateway: 10, reference: 4, difference: 6 },
    { group: 'a', gateway: 3, reference: 0, difference: 3 },
    { group: 'c', gateway: 0, reference: 1, difference: -1 },
  ]);
});

describe('bytesByGroup', () => {
  const node = (functionName: string, url: string, selfSize: number, children: AllocationNode[] = []): AllocationNode => ({ callFrame: { functionName, url }, selfSize, children });
  // (root) → parserOnIncoming (node:_http_server) → run (gateway pipeline) → (V8 API), randomUUID (node:internal/crypto/random)
  //        → (V8 API) with no caller that has a script
  const head = node('(root)', '', 0, [
    node('parserOnIncoming', 'node:_http_server', 300, [node('run', file('gateway/dist/pipeline.js'), 200, [node('(V8 API)', '', 50), node('randomUUID', 'node:internal/crypto/random', 40)])]),
    node('(V8 API)', '', 7),
  ]);

  test("counts each node's own bytes to its group, a frame without a script to its nearest caller's", () => {
    expect(Object.fromEntries(bytesByGroup(head))).toEqual({
      'node: http server + messages': 300,
      'gateway: pipeline': 200 + 50,
      'node: other internals': 40,
      other: 7,
    });
  });

  test('adds to the counts it is given: the runs of one server add up', () => {
    const twice = bytesByGroup(head, bytesByGroup(head));
    expect(twice.get('gateway: pipeline')).toBe(500);
    expect(twice.get('other')).toBe(14);
  });
});
