/**
 * Every service in services.json as two real replicas (built `dist/main.js`, as deployed) behind a
 * real gateway process with the cache off, as a Kubernetes headless Service lays them out: one name
 * per service (its workspace, e.g. `users-service`) that resolves to 127.0.0.1 and 127.0.0.2, both
 * replicas on the same port. The gateway resolves the names through headless-dns.mjs, a test-only
 * preload. Replicas can be stopped (SIGTERM or SIGKILL) and started again, from the built workspace
 * or from another release of it (see releases.ts). Uses no jest globals, so a script can run it.
 */
import { readServiceList, type ServiceEntry } from '@app/shared/platform/services';
import { testPublicKeyPem, TEST_RULES } from './auth.ts';
import { eventually } from './eventually.ts';
import { deployedNodeOptions, ROOT, run, type RunningProcess } from '../../tools/process.ts';
import { closedPort } from '../../tools/tcp-proxy.ts';
import { dyingWithParent } from '../../scripts/setup/servers.ts';

/** The two loopback addresses of each service's replicas: all of 127/8 is loopback on Linux. */
export const REPLICA_HOSTS = ['127.0.0.1', '127.0.0.2'] as const;
/** The longest a replica may take to become ready, or to exit after SIGTERM, before the harness gives up loudly. */
const READY_WITHIN_MS = 30_000;
const EXIT_WITHIN_MS = 30_000;

export interface Replica {
  host: string;
  /** The folder of the release it runs: the workspace itself, or a copy with other migrations. */
  release: string;
  process: RunningProcess;
}

export interface ReplicaSet {
  service: ServiceEntry;
  port: number;
  databaseUrl: string;
  replicas: Replica[];
}

/** A process in a group of its own that dies with this one: nothing the harness starts outlives it. */
function runOwned(args: string[], env: Record<string, string>): RunningProcess {
  const [command, commandArgs] = dyingWithParent(process.execPath, args);
  return run(command, commandArgs, env, ROOT, { ownGroup: true });
}

/** Kills a process's whole group, at once; resolves when it is gone. */
async function killGroup(running: RunningProcess): Promise<void> {
  const { pid, exitCode, signalCode } = running.child;
  if (pid !== undefined && exitCode === null && signalCode === null) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  await running.exited;
}

/** Within `ms`, or a loud failure naming `what`. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether GET `url` answers 200 within a second. */
async function answersOk(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    await response.arrayBuffer();
    return response.status === 200;
  } catch {
    return false;
  }
}

export class ReplicaStack {
  readonly sets: ReplicaSet[];
  gatewayUrl = '';
  #gateway: RunningProcess | undefined;
  /** Every process it started, with who it is, the replaced replicas too. */
  readonly #started: { who: string; process: RunningProcess }[] = [];

  private constructor(sets: ReplicaSet[]) {
    this.sets = sets;
  }

  /** Starts both replicas of every service (each on `databaseUrl(name)`), then the gateway; resolves once all are ready. */
  static async start(databaseUrl: (service: ServiceEntry) => string): Promise<ReplicaStack> {
    const sets = await Promise.all(readServiceList().map(async (service) => ({ service, port: await closedPort(), databaseUrl: databaseUrl(service), replicas: [] as Replica[] })));
    const stack = new ReplicaStack(sets);
    try {
      await Promise.all(sets.flatMap((set) => REPLICA_HOSTS.map((host) => stack.#startReplica(set, host, `${ROOT}/${set.service.workspace}`))));
      await stack.#startGateway();
    } catch (error) {
      await stack.stop();
      throw error;
    }
    return stack;
  }

  set(name: string): ReplicaSet {
    const found = this.sets.find(({ service }) => service.name === name);
    if (!found) throw new Error(`no service ${name} in services.json`);
    return found;
  }

  /** A replica's own URL (not through the gateway). */
  static urlOf(set: ReplicaSet, replica: Replica): string {
    return `http://${replica.host}:${set.port}`;
  }

  /** SIGTERM (or `signal`) to the replica, and its exit; then the same release (or `release`) started in its place, and ready. */
  async restart(set: ReplicaSet, replica: Replica, options: { signal?: NodeJS.Signals; release?: string; beforeStart?: () => Promise<void> } = {}): Promise<Replica> {
    await this.stopReplica(replica, options.signal);
    await options.beforeStart?.();
    return this.#startReplica(set, replica.host, options.release ?? replica.release);
  }

  /** Sends `signal` to a replica's process (as the kubelet does to a container's) and waits for its exit. */
  async stopReplica(replica: Replica, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    replica.process.child.kill(signal);
    await within(EXIT_WITHIN_MS, `the replica on ${replica.host} exiting after ${signal}`, replica.process.exited);
  }

  /** Starts a replica of `set` on `host` from `release` (a folder holding dist/ and migrations/), in the set's place for `host`. */
  startReplica(set: ReplicaSet, host: string, release: string): { replica: Replica; ready: Promise<Replica> } {
    const workspace = set.service.workspace;
    const started = runOwned([...deployedNodeOptions(workspace), `${release}/dist/main.js`], {
      HOST: host,
      PORT: String(set.port),
      DATABASE_URL: set.databaseUrl,
      // Warnings and errors only: a line per request would cost the machine the load needs.
      LOG_LEVEL: 'warn',
    });
    this.#started.push({ who: `${set.service.name}@${host}`, process: started });
    const replica: Replica = { host, release, process: started };
    set.replicas = [...set.replicas.filter((other) => other.host !== host), replica];
    const url = ReplicaStack.urlOf(set, replica);
    const exitedEarly = started.exited.then(({ code, signal }) => {
      throw new Error(`${workspace} on ${host} exited (${code ?? signal}) before it was ready: ${started.stderr()}${started.lines.map((line) => JSON.stringify(line)).join('\n')}`);
    });
    const ready = Promise.race([eventually(() => answersOk(`${url}/readyz`), { withinMs: READY_WITHIN_MS }), exitedEarly]).then(() => replica);
    exitedEarly.catch(() => undefined);
    return { replica, ready };
  }

  #startReplica(set: ReplicaSet, host: string, release: string): Promise<Replica> {
    return this.startReplica(set, host, release).ready;
  }

  async #startGateway(): Promise<void> {
    const port = await closedPort();
    this.#gateway = runOwned(['--import', './test/support/headless-dns.mjs', ...deployedNodeOptions('gateway'), 'gateway/dist/main.js'], {
      PORT: String(port),
      LOG_LEVEL: 'warn',
      AUTH_PUBLIC_KEY: testPublicKeyPem,
      AUTH_ISSUER: TEST_RULES.issuer,
      AUTH_AUDIENCE: TEST_RULES.audience,
      // Every read reaches a replica; budgets would only add 429s to a load from few subjects.
      CACHE_ENABLED: 'false',
      RATE_LIMIT_ENABLED: 'false',
      REDIS_URL: process.env.TEST_REDIS_URL ?? '',
      GATEWAY_UPSTREAMS: this.sets.map(({ service, port: servicePort }) => `${service.name}=http://${service.workspace}:${servicePort}`).join(','),
      TEST_HEADLESS_DNS: this.sets.map(({ service }) => `${service.workspace}=${REPLICA_HOSTS.join(',')}`).join(';'),
    });
    this.#started.push({ who: 'gateway', process: this.#gateway });
    this.gatewayUrl = `http://127.0.0.1:${port}`;
    const exitedEarly = this.#gateway.exited.then(({ code }) => {
      throw new Error(`the gateway exited (${code}) before it was ready: ${this.#gateway?.stderr()}`);
    });
    await Promise.race([eventually(() => answersOk(`${this.gatewayUrl}/readyz`), { withinMs: READY_WITHIN_MS }), exitedEarly]);
    exitedEarly.catch(() => undefined);
  }

  /** Every process it started, killed with its group (SIGKILL): for afterAll, whatever state a test left. */
  async stop(): Promise<void> {
    await Promise.all(this.#started.map(({ process: running }) => killGroup(running)));
  }

  /** The warnings and errors its processes logged, counted by who (the gateway, or a service), message and error code: what a report shows. */
  loggedCounts(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const { who, process: running } of this.#started) {
      for (const line of running.lines) {
        const code = (line.err as { code?: string } | undefined)?.code;
        const key = `${who.replace(/@.*/, '')}: ${String(line.msg)}${code ? ` (${code})` : ''}`;
        counts[key] = (counts[key] ?? 0) + 1;
      }
    }
    return counts;
  }
}
