import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { closedPort } from '../../tools/tcp-proxy.js';

/** A redis-server of the test's own, on a free port (Debian's `redis-server`, as CI installs it). */
export interface OwnRedis {
  url: string;
  /** Stores filler until Redis refuses to store more (maxmemory reached): how many bytes it took. */
  fill(): Promise<number>;
  stop(): Promise<void>;
}

export async function startOwnRedis(settings: { maxmemory: string; policy: string }): Promise<OwnRedis> {
  const port = await closedPort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxmemory', settings.maxmemory, '--maxmemory-policy', settings.policy],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const admin = new Redis(url, { maxRetriesPerRequest: null, retryStrategy: (attempt) => (attempt > 100 ? null : 50) });
  admin.on('error', () => undefined);
  const stop = async () => {
    admin.disconnect();
    child.kill('SIGKILL');
    await exited;
  };
  // Queued until the server listens (ioredis retries the connection every 50 ms, at most 100 times).
  await admin.ping().catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  return {
    url,
    fill: async () => {
      // Ever smaller values: a refused value's bytes are freed again, leaving room for smaller ones.
      let stored = 0;
      let key = 0;
      for (const size of [64 * 1024, 4 * 1024, 256, 16, 1]) {
        const value = Buffer.alloc(size, 'x');
        for (let i = 0; i < 100_000; i++) {
          const refused = await admin.set(`filler:${key++}`, value).then(
            () => false,
            (error: Error) => {
              if (/OOM/.test(error.message)) return true;
              throw error;
            },
          );
          if (refused) break;
          stored += size;
        }
      }
      return stored;
    },
    stop,
  };
}
