/**
 * A mixed load through the gateway for the roll tests: `concurrency` requests in flight at all times
 * (node:http, kept-alive connections), 90% reads and 10% creates across every service, each worker
 * with a token of its own subject (users' records are seen only by their owner). Every response is
 * counted by status and every request that failed at the socket by its error code. Each create
 * carries a marker of its own in a field no index keeps unique (its `name`), half of them with an
 * Idempotency-Key, so that afterwards the database tells whether any write was applied twice
 * (writtenTwice). Uses no jest globals, so a script can run it.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import { testToken } from './auth.ts';

const REQUEST_TIMEOUT_MS = 10_000;
const WRITE_SHARE = 0.1;

/** A service the load covers: how to create one of its records with `marker` as its name, and how to read them. */
export interface LoadTarget {
  /** Its name in services.json and its path: /api/<name>. */
  name: string;
  /** Its table, where markers are counted afterwards. */
  table: string;
  databaseUrl: string;
  createBody(marker: string): Record<string, unknown>;
  /** A page of its list as well as items: `?limit=` */
  listLimit: number;
}

export interface WriteAttempt {
  target: string;
  marker: string;
  idempotencyKey: string | undefined;
  /** Its status, or the socket error it failed with. */
  outcome: number | string;
}

export interface LoadCounts {
  requests: number;
  reads: number;
  writes: number;
  byStatus: Record<number, number>;
  socketFailures: Record<string, number>;
  /** Up to 10 of the 5xx answers and socket failures: what, when (ms from the start), and the problem's detail. */
  failures: string[];
}

interface Answer {
  status: number;
  body: string;
}

/** One request on `agent`; a socket-level failure rejects with the error. */
function send(agent: http.Agent, url: URL, method: string, token: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const request = http.request(url, {
      agent,
      method,
      timeout: REQUEST_TIMEOUT_MS,
      headers: { authorization: `Bearer ${token}`, ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }), ...headers },
    });
    request.on('timeout', () => request.destroy(Object.assign(new Error('no answer in time'), { code: 'TIMEOUT' })));
    request.on('error', reject);
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', reject);
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    request.end(payload);
  });
}

/** A problem's detail, or the start of a body that is none. */
function detailOf(body: string): string {
  try {
    return String((JSON.parse(body) as { detail?: unknown }).detail);
  } catch {
    return body.slice(0, 200);
  }
}

interface Worker {
  token: string;
  /** Ids this worker's subject may read, by service. */
  ids: Map<string, string[]>;
}

export class MixedLoad {
  readonly counts: LoadCounts = { requests: 0, reads: 0, writes: 0, byStatus: {}, socketFailures: {}, failures: [] };
  readonly writes: WriteAttempt[] = [];
  readonly #agent: http.Agent;
  readonly #started = Date.now();
  #running = false;
  #workers: Promise<void>[] = [];
  #created = 0;

  private constructor(
    private readonly gatewayUrl: string,
    private readonly targets: LoadTarget[],
    private readonly workers: Worker[],
    private readonly options: { writes: boolean },
  ) {
    this.#agent = new http.Agent({ keepAlive: true, maxSockets: workers.length });
  }

  /** `concurrency` workers, each with its own subject and one record of each target to read from the start. */
  static async prepare(gatewayUrl: string, targets: LoadTarget[], options: { concurrency?: number; writes?: boolean } = {}): Promise<MixedLoad> {
    const workers = await Promise.all(
      Array.from({ length: options.concurrency ?? 32 }, async (_, index): Promise<Worker> => ({ token: await testToken({ subject: `roll-${index}-${randomUUID()}` }), ids: new Map() })),
    );
    const load = new MixedLoad(gatewayUrl, targets, workers, { writes: options.writes ?? true });
    for (const worker of workers) {
      for (const target of targets) {
        const created = await load.#create(worker, target);
        if (created === undefined) throw new Error(`could not create a ${target.name} record before the load: ${JSON.stringify(load.counts)}`);
      }
    }
    return load;
  }

  /** Starts every worker; they run until stop(). */
  start(): void {
    this.#running = true;
    this.#workers = this.workers.map((worker) => this.#work(worker));
  }

  /** Stops the workers after their current request; resolves with the counts. */
  async stop(): Promise<LoadCounts> {
    this.#running = false;
    await Promise.all(this.#workers);
    this.#agent.destroy();
    return this.counts;
  }

  async #work(worker: Worker): Promise<void> {
    while (this.#running) {
      const target = this.targets[Math.floor(Math.random() * this.targets.length)]!;
      if (this.options.writes && Math.random() < WRITE_SHARE) await this.#create(worker, target);
      else await this.#read(worker, target);
    }
  }

  async #read(worker: Worker, target: LoadTarget): Promise<void> {
    const ids = worker.ids.get(target.name) ?? [];
    const path = Math.random() < 0.8 && ids.length > 0 ? `/api/${target.name}/${ids[Math.floor(Math.random() * ids.length)]}` : `/api/${target.name}?limit=${target.listLimit}`;
    this.counts.reads++;
    await this.#request(worker, 'GET', path);
  }

  async #create(worker: Worker, target: LoadTarget): Promise<string | undefined> {
    const marker = `roll-${process.pid}-${++this.#created}-${randomUUID()}`;
    const idempotencyKey = this.#created % 2 === 0 ? randomUUID() : undefined;
    const attempt: WriteAttempt = { target: target.name, marker, idempotencyKey, outcome: 'unsent' };
    this.writes.push(attempt);
    this.counts.writes++;
    const answer = await this.#request(worker, 'POST', `/api/${target.name}`, target.createBody(marker), idempotencyKey === undefined ? {} : { 'Idempotency-Key': idempotencyKey });
    attempt.outcome = answer?.status ?? attempt.outcome;
    if (answer?.status !== 201) return undefined;
    const id = (JSON.parse(answer.body) as { id: string }).id;
    worker.ids.set(target.name, [...(worker.ids.get(target.name) ?? []), id]);
    return id;
  }

  async #request(worker: Worker, method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Answer | undefined> {
    this.counts.requests++;
    const at = Date.now() - this.#started;
    try {
      const answer = await send(this.#agent, new URL(path, this.gatewayUrl), method, worker.token, body, headers);
      this.counts.byStatus[answer.status] = (this.counts.byStatus[answer.status] ?? 0) + 1;
      if (answer.status >= 500) this.#failed(`${method} ${path} at ${at} ms: ${answer.status} ${detailOf(answer.body)}`);
      return answer;
    } catch (error) {
      const code = (error as { code?: string }).code ?? (error as Error).message;
      this.counts.socketFailures[code] = (this.counts.socketFailures[code] ?? 0) + 1;
      this.#failed(`${method} ${path} at ${at} ms: ${code}`);
      return undefined;
    }
  }

  #failed(what: string): void {
    if (this.counts.failures.length < 10) this.counts.failures.push(what);
  }
}

/**
 * What the database says of the load's creates, counted by marker: `writtenTwice`, markers stored
 * more than once (or a create answered 409 although its marker was new: an earlier attempt of it had
 * been applied); `acknowledgedMissing`, 201s whose marker is not stored exactly once; `appliedUnacknowledged`,
 * creates stored once whose client got no 201 (allowed: the answer of a write that was done was lost).
 */
export async function checkWrites(targets: LoadTarget[], writes: WriteAttempt[]) {
  const stored = new Map<string, number>();
  for (const target of targets) {
    const connection = await mysql.createConnection(target.databaseUrl);
    try {
      const [rows] = await connection.query<mysql.RowDataPacket[]>(`SELECT name, COUNT(*) AS copies FROM \`${target.table}\` WHERE name LIKE 'roll-%' GROUP BY name`);
      for (const row of rows) stored.set(row.name as string, Number(row.copies));
    } finally {
      await connection.end();
    }
  }
  const copies = (write: WriteAttempt) => stored.get(write.marker) ?? 0;
  return {
    writes: writes.length,
    writtenTwice: writes.filter((write) => copies(write) > 1 || (write.outcome === 409 && copies(write) === 1)).map((write) => `${write.target} ${write.marker}: ${copies(write)} stored, answered ${write.outcome}`),
    acknowledgedMissing: writes.filter((write) => write.outcome === 201 && copies(write) !== 1).map((write) => `${write.target} ${write.marker}: ${copies(write)} stored`),
    appliedUnacknowledged: writes.filter((write) => write.outcome !== 201 && copies(write) === 1).length,
  };
}
