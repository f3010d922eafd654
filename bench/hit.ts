/**
 * The warm hit against the same-bytes peer. `capturedResponse` reads the gateway's answer to a
 * request off a raw socket, as a client gets it, for bench/servers/same-bytes.ts to replay.
 * `npm run bench -- --hit` measures only what the warm hit's goal and the proxied read's bars are
 * judged by: the gateway with a warm cache and with its cache off (protections on as deployed,
 * BENCH_GATEWAY_PROCESSES processes each), the same-bytes peer, the ceiling and
 * http-proxy-middleware alone, in BENCH_RUNS interleaved rounds (rounds.ts); writes
 * bench/results/hit.json.
 */
import net from 'node:net';
import { printRatios, cpuRatio, gcRatio, cpuRatioAtOnce, type Judged } from './ratios.ts';
import { measureAll, type Figures, type Target } from './rounds.ts';
import {
  cleanUpOnSignals,
  dropSchemas,
  ensureBenchTools,
  freePort,
  guardOn,
  productsServiceWithAProduct,
  REDIS_URL,
  startNode,
  startProcesses,
  stopAll,
  throwawaySchema,
  warm,
  writeResults,
  type Server,
} from './support.ts';

/** A response as the same-bytes peer replays it: its status, its header lines (name, value, …) and its body in base64. */
export interface CapturedResponse {
  status: number;
  headers: string[];
  body: string;
}

/** The headers Node writes itself on every response, left to the peer's Node. */
const NODE_OWN = new Set(['date', 'connection', 'keep-alive']);

/** The response `url` + `path` answers a GET with `headers` with, read whole off one socket (a Content-Length body). */
export function capturedResponse(url: string, path: string, headers: Record<string, string>): Promise<CapturedResponse> {
  const { hostname, port } = new URL(url);
  const lines = [`GET ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(`${lines.join('\r\n')}\r\n\r\n`));
    let received = Buffer.alloc(0);
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...fields] = received.subarray(0, end).toString('latin1').split('\r\n');
      const pairs = fields.map((field) => [field.slice(0, field.indexOf(':')), field.slice(field.indexOf(':') + 1).trim()] as const);
      const length = Number(pairs.find(([name]) => name.toLowerCase() === 'content-length')?.[1] ?? 0);
      if (received.length < end + 4 + length) return;
      socket.destroy();
      resolve({
        status: Number(statusLine!.split(' ')[1]),
        headers: pairs.filter(([name]) => !NODE_OWN.has(name.toLowerCase())).flat(),
        body: received.subarray(end + 4, end + 4 + length).toString('base64'),
      });
    });
  });
}

/** The same-bytes peer of a warm gateway: its hit for `path`, captured, replayed by a bare server. */
export async function sameBytesPeer(gateway: Server, path: string, headers: Record<string, string>): Promise<Server> {
  const captured = await capturedResponse(gateway.url, path, headers);
  if (!captured.headers.some((value, i) => i % 2 === 1 && value === 'HIT' && /^x-cache$/i.test(captured.headers[i - 1]!))) {
    throw new Error(`the gateway's answer to capture is not a hit: ${JSON.stringify(captured.headers)}`);
  }
  return startNode('same-bytes peer', 'bench/servers/same-bytes.ts', { RESPONSE: JSON.stringify(captured) }, await freePort());
}

/**
 * The judged ratio of issue 49, the warm hit over the same-bytes peer, measured with both loaded at
 * once (`cpuRatioAtOnce`). The proxied read's bars are judged from the rounds, one at a time: loaded at
 * once, the gateway and http-proxy-middleware alone would share one saturated service, which the
 * gateway queues for in bounded slots and the library does not, and the ratio would measure that.
 */
export async function judgedHit(target: (key: string) => Target, path: string): Promise<Record<string, Judged>> {
  console.log('the warm hit and the same-bytes peer, loaded at once:');
  const hit = await cpuRatioAtOnce(target('gatewayWarmGuarded'), target('sameBytes'), path);
  return { 'warm hit / same-bytes peer, at once': { ...hit, goal: 1.4 } };
}

/** The proxied read's bars (issue 38), from the rounds. */
export const proxiedBars = (figures: Record<string, Figures>): { cpu: Record<string, Judged>; gc: Record<string, Judged> } => ({
  cpu: { 'proxied read / http-proxy-middleware alone': { ...cpuRatio(figures, 'gatewayCacheOffGuarded', 'hpmProxy'), goal: 1.25 } },
  gc: { "GC time per proxied request / http-proxy-middleware alone's": { ...gcRatio(figures, 'gatewayCacheOffGuarded', 'hpmProxy'), goal: 1.5 } },
});

/** `npm run bench -- --hit`. */
export async function runHit(): Promise<void> {
  ensureBenchTools();
  const schema = throwawaySchema('products');
  cleanUpOnSignals([schema]);
  try {
    const { products, path } = await productsServiceWithAProduct(schema, { sku: 'BENCH-1', name: 'Benchmark widget' });
    const authorised = await guardOn();
    const gateways = (name: string, cache: boolean) =>
      startProcesses(name, async (one) => startNode(one, 'gateway/dist/main.js', { UPSTREAM_URL_TEMPLATE: products.url, REDIS_URL, ...authorised.env, CACHE_ENABLED: String(cache) }, await freePort()));
    const cached = await gateways('gateway, warm cache, auth', true);
    const uncached = await gateways('gateway, cache off, auth', false);
    for (const gateway of cached) await warm(`${gateway.url}${path}`, authorised.headers);
    const sameBytes = await sameBytesPeer(cached[0]!, path, authorised.headers);
    const sample = await fetch(`${products.url}${path}`);
    const answered = Object.fromEntries(['content-type', 'etag', 'cache-control'].map((name) => [name, sample.headers.get(name) ?? '']));
    const ceiling = await startNode('ceiling', 'bench/servers/ceiling.ts', { RESPONSE: JSON.stringify({ body: await sample.text(), headers: answered }) }, await freePort());
    const hpmProxy = await startNode('http-proxy-middleware alone', 'bench/servers/hpm-proxy.ts', { UPSTREAM_URL: products.url }, await freePort());
    // The peers get the gateway's request, token included: Node parses the same bytes on both sides.
    const targets: Target[] = [
      { key: 'gatewayWarmGuarded', label: 'gateway, warm cache, auth + limits', group: 'ours', servers: cached, headers: authorised.headers },
      { key: 'sameBytes', label: 'bare node:http, the hit\'s exact bytes', group: 'reference', servers: [sameBytes], headers: authorised.headers },
      { key: 'ceiling', label: 'bare node:http ceiling', group: 'reference', servers: [ceiling], headers: authorised.headers },
      { key: 'gatewayCacheOffGuarded', label: 'gateway, cache off, auth + limits', group: 'ours', servers: uncached, headers: authorised.headers },
      { key: 'hpmProxy', label: 'node:http + http-proxy-middleware alone', group: 'reference', servers: [hpmProxy] },
    ];
    const figures = await measureAll(targets, path, (target) => ({ ...target.headers }));
    const bars = proxiedBars(figures);
    const judged = {
      cpuRatios: {
        ...(await judgedHit((key) => targets.find((t) => t.key === key)!, path)),
        'warm hit / same-bytes peer, one at a time': cpuRatio(figures, 'gatewayWarmGuarded', 'sameBytes'),
        'warm hit / node:http ceiling': cpuRatio(figures, 'gatewayWarmGuarded', 'ceiling'),
        'same-bytes peer / node:http ceiling': cpuRatio(figures, 'sameBytes', 'ceiling'),
        ...bars.cpu,
      },
      gcRatios: bars.gc,
    };
    console.table(Object.fromEntries(targets.map((t) => [t.label, { 'req/s': figures[t.key]!.requestsPerSecond, 'CPU µs/req': figures[t.key]!.cpuMicrosPerRequest, 'by round': figures[t.key]!.cpuMicrosPerRequestByRound.join(' / '), 'GC µs/req': figures[t.key]!.gcMicrosPerRequest, 'RSS MiB': figures[t.key]!.rssMiB, 'non-2xx': figures[t.key]!.non2xx }])));
    console.log('CPU time per request, over the reference\'s in the same run or round (median; each):');
    printRatios(judged.cpuRatios);
    printRatios(judged.gcRatios);
    await writeResults('hit', { path, targets: Object.fromEntries(targets.map((t) => [t.key, { label: t.label, ...figures[t.key]! }])), ...judged });
  } finally {
    await stopAll();
    await dropSchemas([schema]);
  }
}
