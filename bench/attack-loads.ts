/**
 * The four attacks of issue 44, as `npm run bench:attacks` (bench/attacks.ts) runs them against a
 * gateway: each resolves, once every socket it opened is closed, with a line saying what it did.
 */
import { freshCursor, zerosArray, type AttackName, type Read, type Settings } from './attack-stats.ts';
import { agentFrom, looped, openConnection, paced, send, Trickler, type Opened } from './attack-sockets.ts';

/** The gateway under attack, and what the attacker holds. */
export interface Target {
  port: number;
  metricsPort: number;
  /** The attacker's loopback address: not the normal client's, so that a cap per client address meets the attacker only. */
  attackerAddress: string;
  /** The attacker's bearer token (read and write scopes of both services). */
  attackerToken: string;
  productIds: string[];
  /** Earlier than every product's id: cursors from here name full pages. */
  beforeProductsMs: number;
}

export type Attack = (target: Target, settings: Settings) => Promise<string>;

/** `reads` counted by status (`200×12, 429×3`). */
export function statusCounts(reads: Read[]): string {
  const counts = new Map<Read['status'], number>();
  for (const { status } of reads) counts.set(status, (counts.get(status) ?? 0) + 1);
  return [...counts].map(([status, n]) => `${status}×${n}`).join(', ') || 'none';
}

/**
 * Big pages refilled: each round a PATCH of one product renews the list's generation, then a page
 * of 200 products after a cursor never seen before, and the first page, are read with br and gzip
 * accepted; `concurrency` rounds at a time, as fast as the answers come.
 */
const pages: Attack = async (target, { pages: settings }) => {
  const agent = agentFrom(target.attackerAddress);
  const headers = { authorization: `Bearer ${target.attackerToken}`, 'accept-encoding': 'br, gzip' };
  const reads: Read[] = [];
  const rounds = await looped(settings, async (i) => {
    const id = target.productIds[i % target.productIds.length]!;
    const patch = { stock: i % 1_000 };
    const body = JSON.stringify(patch);
    reads.push(await send({ agent, port: target.port, method: 'PATCH', path: `/api/products/${id}`, headers: { ...headers, 'content-type': 'application/merge-patch+json' }, body }));
    const cursor = freshCursor(target.beforeProductsMs);
    reads.push(await send({ agent, port: target.port, method: 'GET', path: `/api/products?limit=200&cursor=${cursor}`, headers }));
    reads.push(await send({ agent, port: target.port, method: 'GET', path: '/api/products?limit=200', headers }));
  });
  agent.destroy();
  return `${rounds} rounds of PATCH + 2 pages of 200 (answers: ${statusCounts(reads)})`;
};

/**
 * Opens up to `count` connections, `perSecond` a second, for `seconds`, each through `open`; holds
 * every one a trickler is given until `seconds` have passed, then closes them all.
 */
async function holdConnections(schedule: { count: number; perSecond: number; seconds: number }, trickler: Trickler, open: () => Promise<Opened>): Promise<string> {
  const began = performance.now();
  let refused = 0;
  let noFile = 0;
  await paced({ ...schedule, stopped: () => noFile > 0 }, async () => {
    const opened = await open();
    if (opened === 'refused') refused++;
    else if (opened === 'no file') noFile++;
    else trickler.add(opened);
  });
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, began + schedule.seconds * 1000 - performance.now())));
  const heldAtEnd = trickler.held;
  trickler.closeAll();
  const limit = noFile > 0 ? '; stopped opening: no file descriptor left in this script' : '';
  return `${schedule.count} to open in ${schedule.seconds} s: at most ${trickler.peak} held at once, ${heldAtEnd} still held at the end, ${trickler.closedByServer} closed by the gateway, ${refused} refused or unanswered${limit}`;
}

/** Held connections: after one GET /healthz, a second request head trickled a byte at a time. */
const connections: Attack = (target, settings) => {
  const trickler = new Trickler(settings.trickleMs, 'a');
  const healthz = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
  // The second head is begun at once (within the keep-alive wait) and never ends: one header's value, a byte at a time.
  const second = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ';
  return holdConnections(settings.connections, trickler, () => openConnection(target.port, target.attackerAddress, healthz, second));
};

/** A slow metrics body: POST /metrics with a Content-Length, the body trickled a byte at a time. */
const metricsBody: Attack = (target, settings) => {
  const { count, seconds } = settings.metricsBody;
  const trickler = new Trickler(settings.trickleMs, '0');
  const head = 'POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n';
  const schedule = { count, seconds, perSecond: Math.max(1, count / seconds) };
  return holdConnections(schedule, trickler, () => openConnection(target.metricsPort, target.attackerAddress, head));
};

/** An invalid body flood: a JSON array of zeros POSTed to /api/users, `perSecond` a second, whether answered or not. */
const invalidBodies: Attack = async (target, { invalidBodies: settings }) => {
  const agent = agentFrom(target.attackerAddress);
  const body = zerosArray(settings.elements);
  const headers = { authorization: `Bearer ${target.attackerToken}`, 'content-type': 'application/json' };
  const count = settings.perSecond * settings.seconds;
  const reads = await paced({ ...settings, count }, () => send({ agent, port: target.port, method: 'POST', path: '/api/users', headers, body }));
  agent.destroy();
  return `${reads.length} POSTs of ${body.length.toLocaleString('en')} bytes, ${settings.perSecond}/s (answers: ${statusCounts(reads)})`;
};

export const ATTACK_RUNS: Record<AttackName, Attack> = { pages, connections, 'metrics-body': metricsBody, 'invalid-bodies': invalidBodies };
