/**
 * The normal client of `npm run bench:attacks` (bench/attacks.ts), run in a worker thread: its
 * reads are timed on an event loop of their own, which the attacker's thousands of sockets in the
 * main thread cannot delay. It reads until the main thread posts `stop` (or its bound), then posts
 * back every read.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { agentFrom, paced, send } from './attack-sockets.ts';

/** What the main thread gives the normal client. */
export interface NormalClient {
  port: number;
  token: string;
  /** The paths it reads, in turn; `{i}` becomes the read's number. */
  paths: string[];
  perSecond: number;
  seconds: number;
}

const { port, token, paths, perSecond, seconds } = workerData as NormalClient;
const agent = agentFrom('127.0.0.1');
const headers = { authorization: `Bearer ${token}`, 'accept-encoding': 'br, gzip' };
let stopped = false;
parentPort!.once('message', () => (stopped = true));
const schedule = { perSecond, seconds, count: perSecond * seconds, stopped: () => stopped };
const reads = await paced(schedule, (i) => send({ agent, port, method: 'GET', path: paths[i % paths.length]!.replaceAll('{i}', String(i)), headers }));
agent.destroy();
parentPort!.postMessage(reads);
