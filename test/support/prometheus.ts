import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { findProgram } from '../../scripts/setup/machine.ts';
import { run, type RunningProcess } from '../../tools/process.ts';
import { closedPort } from '../../tools/tcp-proxy.ts';
import { eventually } from './eventually.js';

/** An alert as Prometheus's /api/v1/alerts lists it. */
export interface ActiveAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
}

export interface QueryResult {
  status: string;
  error?: string;
  data?: { result: { metric: Record<string, string>; value: [number, string] }[] };
}

export interface RunningPrometheus {
  url: string;
  process: RunningProcess;
  /** An instant query, as Prometheus answers it (an invalid one: status "error"). */
  query(expr: string): Promise<QueryResult>;
  alerts(): Promise<ActiveAlert[]>;
  close(): Promise<void>;
}

/**
 * A real Prometheus (Debian's `prometheus`, scripts/setup/needs.ts) in a folder of its own on a
 * free port, scraping each job's targets and evaluating `ruleFiles` every second; `close` stops it
 * and removes the folder.
 */
export async function startPrometheus(jobs: Record<string, string[]>, ruleFiles: string[]): Promise<RunningPrometheus> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'prometheus-'));
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    rule_files: ruleFiles,
    scrape_configs: Object.entries(jobs).map(([job, targets]) => ({ job_name: job, static_configs: [{ targets: targets.map((url) => new URL(url).host) }] })),
  };
  await writeFile(path.join(dir, 'prometheus.yml'), JSON.stringify(config));
  const port = await closedPort();
  const url = `http://127.0.0.1:${port}`;
  const args = [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'];
  const prometheus = run(findProgram('prometheus') ?? 'prometheus', args, {}, dir);
  const close = async () => {
    prometheus.child.kill('SIGTERM');
    await prometheus.exited;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await eventually(async () => (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok === true, { withinMs: 20_000, everyMs: 100 });
  } catch (error) {
    await close();
    throw new Error(`prometheus did not get ready: ${prometheus.stderr()}`, { cause: error });
  }
  const api = async <T>(pathAndQuery: string): Promise<T> => (await (await fetch(`${url}${pathAndQuery}`)).json()) as T;
  return {
    url,
    process: prometheus,
    query: (expr) => api<QueryResult>(`/api/v1/query?query=${encodeURIComponent(expr)}`),
    alerts: async () => (await api<{ data: { alerts: ActiveAlert[] } }>('/api/v1/alerts')).data.alerts,
    close,
  };
}
