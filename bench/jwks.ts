/**
 * `npm run bench -- --jwks`: what checking tokens against a key set fetched from a JWKS URL costs the
 * gateway, in CPU time per request (from /proc), against checking them with a key given in its
 * config. Two configurations of the gateway, protections on as deployed (authentication and rate
 * limits, a budget no run reaches) and a warm cache, GET /api/products/{id}: AUTH_PUBLIC_KEY (the
 * development key, as `npm run bench` runs it) and AUTH_JWKS_URL (the same public key, with its
 * `kid`, served by this process on 127.0.0.1). Each runs as BENCH_GATEWAY_PROCESSES processes (3).
 * Two kinds of request, each judged: one token on every request (remembered after its first check:
 * what most requests cost), and a new token on every request, cycling in order through twice as
 * many pre-signed tokens as the gateway remembers (bench/token-cycle.lua), so that each request
 * checks a signature; every token has the same subject, counted by one rate limit. BENCH_RUNS
 * rounds (5); in each, every key-given process runs at the same time as a JWKS one (another each
 * round) for BENCH_SECONDS (4), both on the servers' quiet core (`settle`), each with its own wrk,
 * so that whatever the machine does meanwhile falls on both alike. A round's figure for a
 * configuration is its processes' CPU time over the requests they answered; its ratio, the JWKS
 * one's over the local key's; the median of the rounds is judged against issue 46's goal (at most
 * 1.05). Prints every round; writes bench/results/jwks.json.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { REMEMBERED_TOKENS } from '../gateway/dist/auth/tokens.js';
import { devPublicKey, signDevToken } from '../tools/dev-token.ts';
import { DEV_AUDIENCE, DEV_ISSUER } from '../shared/src/platform/dev-auth.ts';
import { printRatios, ratioByRound, type Judged } from './ratios.ts';
import { CONNECTIONS, RUNS, SECONDS, WARM_UP_SECONDS } from './rounds.ts';
import {
  cleanUpOnSignals,
  dropSchemas,
  ensureBenchTools,
  freePort,
  GATEWAY_PROCESSES,
  guardOn,
  pinning,
  productsServiceWithAProduct,
  REDIS_URL,
  startNode,
  startProcesses,
  stopAll,
  throwawaySchema,
  writeResults,
  warm,
  type Server,
} from './support.ts';
import { measuredAtOnce } from './measured-runs.ts';
import { wrk, type LoadResult } from './wrk.ts';

/** Issue 46: the JWKS path's CPU time per request at most 5% above the local key's. */
const GOAL = 1.05;
/** Twice what the gateway remembers: in order, a token comes back only after it was forgotten. */
const TOKENS = 2 * REMEMBERED_TOKENS;
const TOKEN_CYCLE = new URL('token-cycle.lua', import.meta.url).pathname;

const CONFIGURATIONS = ['localKey', 'jwks'] as const;
type Configuration = (typeof CONFIGURATIONS)[number];
const KINDS = ['sameToken', 'newTokens'] as const;
type Kind = (typeof KINDS)[number];
const LABELS: Record<Kind, string> = { sameToken: 'one token, remembered', newTokens: 'a new token every request' };

type Gateways = Record<Configuration, Server[]>;
interface Round {
  startedAt: string;
  kind: Kind;
  cpuMicrosPerRequest: Record<Configuration, number>;
  gcMicrosPerRequest: Record<Configuration, number>;
  requestsPerSecond: Record<Configuration, number>;
  ratio: number;
}

/**
 * Where the next run over a process starts in the token file (a line index), after a run that
 * started at `start` and had `answered` requests answered: past every token that run may have sent
 * (up to one a connection more than were answered), so that the process never meets again a token
 * it still remembers.
 */
export function nextStart(start: number, answered: number, connections: number, tokens: number): number {
  if (connections >= tokens - REMEMBERED_TOKENS) throw new Error(`${connections} connections could skip over tokens the gateway still remembers`);
  return (start + answered + connections) % tokens;
}

/** A JWKS endpoint on 127.0.0.1 serving the development key's public half (with its `kid`), counting its fetches. */
async function keySetServer(): Promise<{ url: string; fetches: () => number; close: () => Promise<void> }> {
  const body = JSON.stringify({ keys: [JSON.parse(devPublicKey()) as object] });
  let fetches = 0;
  const server = http.createServer((_req, res) => {
    fetches++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`,
    fetches: () => fetches,
    close: () => new Promise((resolve) => server.close(() => resolve()).closeAllConnections()),
  };
}

/** TOKENS tokens like the bench's one (the same subject, scope and key), one a line, in a file of `directory`: its path. */
async function tokenFile(directory: string): Promise<string> {
  const tokens: string[] = [];
  for (let i = 0; i < TOKENS; i++) tokens.push(await signDevToken({ scopes: ['products:read'], subject: 'bench', ttlSeconds: 3_600 }));
  const file = path.join(directory, 'tokens');
  await writeFile(file, `${tokens.join('\n')}\n`);
  return file;
}

/** Loads one process with one kind of request; a new-token load goes on in the token file from where the process's last one stopped. */
function loader(headers: Record<string, string>, tokens: string, productPath: string) {
  const starts = new Map<Server, number>();
  return async (server: Server, kind: Kind, seconds: number): Promise<LoadResult> => {
    const url = `${server.url}${productPath}`;
    if (kind === 'sameToken') return wrk(url, { connections: CONNECTIONS, headers, seconds });
    const start = starts.get(server) ?? 0;
    const result = await wrk(url, { connections: CONNECTIONS, seconds, script: TOKEN_CYCLE, scriptArgs: [tokens, String(start)] });
    starts.set(server, nextStart(start, result.requests, CONNECTIONS, TOKENS));
    return result;
  };
}
type Load = ReturnType<typeof loader>;

/**
 * One round of one kind of request, in pairs run at once: each key-given process beside a JWKS one
 * (a different one each round), both on the servers' core, each with its own wrk. A
 * configuration's figure is its processes' CPU time over the requests they answered.
 */
async function round(gateways: Gateways, kind: Kind, index: number, load: Load): Promise<Round> {
  const startedAt = new Date().toISOString();
  const totals = Object.fromEntries(CONFIGURATIONS.map((c) => [c, { cpu: 0, gc: 0, requests: 0, rps: 0 }])) as Record<Configuration, { cpu: number; gc: number; requests: number; rps: number }>;
  const pairs = gateways.localKey.map((server, i) => ({ localKey: server, jwks: gateways.jwks[(i + index) % gateways.jwks.length]! }));
  for (const pair of pairs) {
    const runs = await measuredAtOnce(CONFIGURATIONS.map((c) => ({ server: pair[c], load: () => load(pair[c], kind, SECONDS) })));
    CONFIGURATIONS.forEach((configuration, i) => {
      const { result, cpuMicros, gcMicros } = runs[i]!;
      if (result.non2xx > 0 || result.socketErrors > 0) throw new Error(`${pair[configuration].name}, ${LABELS[kind]}: ${result.non2xx} non-2xx, ${result.socketErrors} socket errors`);
      const total = totals[configuration];
      total.cpu += cpuMicros;
      total.gc += gcMicros ?? 0;
      total.requests += result.requests;
      total.rps += result.requestsPerSecond / pairs.length;
    });
  }
  const perRequest = (micros: number, requests: number) => Math.round((micros / Math.max(requests, 1)) * 10) / 10;
  const figure = <T>(of: (total: (typeof totals)[Configuration]) => T) => Object.fromEntries(CONFIGURATIONS.map((c) => [c, of(totals[c])])) as Record<Configuration, T>;
  const cpu = figure((t) => perRequest(t.cpu, t.requests));
  const gc = figure((t) => perRequest(t.gc, t.requests));
  const rps = figure((t) => Math.round(t.rps));
  const ratio = Math.round((cpu.jwks / cpu.localKey) * 1000) / 1000;
  console.log(
    `  round ${index + 1} ${LABELS[kind].padEnd(26)} ${startedAt.slice(11, 19)} UTC  CPU µs/req: local key ${cpu.localKey}, JWKS ${cpu.jwks} (GC ${gc.localKey}, ${gc.jwks}; req/s ${rps.localKey}, ${rps.jwks})  ratio ${ratio}`,
  );
  return { startedAt, kind, cpuMicrosPerRequest: cpu, gcMicrosPerRequest: gc, requestsPerSecond: rps, ratio };
}

/** Each kind's ratio, the median of its rounds' judged against the goal, printed with every round's. */
function judge(rounds: Round[]): Record<Kind, Judged> {
  const judged = {} as Record<Kind, Judged>;
  for (const kind of KINDS) {
    const own = rounds.filter((r) => r.kind === kind);
    const cpu = (configuration: Configuration) => own.map((r) => r.cpuMicrosPerRequest[configuration]);
    judged[kind] = { ...ratioByRound(cpu('localKey'), cpu('jwks')), goal: GOAL };
  }
  console.log("CPU time per request with the JWKS over the local key's, median of the rounds (each round):");
  printRatios(Object.fromEntries(KINDS.map((kind) => [LABELS[kind], judged[kind]])));
  return judged;
}

/** The gateway's processes of both configurations, cache on, their one product's entry warm. */
async function startGateways(productPath: string, upstream: string, jwksUrl: string): Promise<{ gateways: Gateways; headers: Record<string, string> }> {
  const guarded = await guardOn();
  const { AUTH_PUBLIC_KEY, ...guard } = guarded.env;
  const common = { ...guard, UPSTREAM_URL_TEMPLATE: upstream, REDIS_URL, CACHE_ENABLED: 'true', AUTH_ISSUER: DEV_ISSUER, AUTH_AUDIENCE: DEV_AUDIENCE };
  const keys: Record<Configuration, Record<string, string>> = { localKey: { AUTH_PUBLIC_KEY: AUTH_PUBLIC_KEY! }, jwks: { AUTH_JWKS_URL: jwksUrl } };
  const gateways = {} as Gateways;
  for (const configuration of CONFIGURATIONS) {
    gateways[configuration] = await startProcesses(`gateway ${configuration}`, async (name) =>
      startNode(name, 'gateway/dist/main.js', { ...common, ...keys[configuration] }, await freePort()),
    );
    for (const gateway of gateways[configuration]) await warm(`${gateway.url}${productPath}`, guarded.headers);
  }
  return { gateways, headers: guarded.headers };
}

export async function runJwks(): Promise<void> {
  ensureBenchTools();
  const schema = throwawaySchema('jwks');
  const directory = await mkdtemp(path.join(os.tmpdir(), 'bench-jwks-'));
  const removeTokens = () => rm(directory, { recursive: true, force: true });
  cleanUpOnSignals([schema], removeTokens);
  const keySet = await keySetServer();
  try {
    const { products, path: productPath } = await productsServiceWithAProduct(schema, { sku: 'JWKS-1', name: 'Keyed widget' });
    const { gateways, headers } = await startGateways(productPath, products.url, keySet.url);
    const load = loader(headers, await tokenFile(directory), productPath);
    for (const kind of KINDS) for (const server of CONFIGURATIONS.flatMap((c) => gateways[c])) await load(server, kind, WARM_UP_SECONDS);

    console.log(
      `GET ${productPath}, warm cache, protections on, wrk -t1 -c${CONNECTIONS}, ${RUNS} rounds × ${SECONDS} s, ${GATEWAY_PROCESSES} processes of each, ${TOKENS} tokens in turn for a new one every request, ${pinning ? 'servers on core 0, wrk on core 1' : 'not pinned'}`,
    );
    const rounds: Round[] = [];
    for (let index = 0; index < RUNS; index++) for (const kind of KINDS) rounds.push(await round(gateways, kind, index, load));
    const judged = judge(rounds);
    console.log(`the key set was fetched ${keySet.fetches()} times`);
    const results = {
      settings: { path: productPath, connections: CONNECTIONS, runs: RUNS, seconds: SECONDS, processes: GATEWAY_PROCESSES, tokens: TOKENS, goal: GOAL },
      rounds,
      judged,
      keySetFetches: keySet.fetches(),
    };
    await writeResults('jwks', results);
  } finally {
    await stopAll();
    await keySet.close();
    await removeTokens();
    await dropSchemas([schema]);
  }
}
