import type { TestServers } from './servers.js';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { testServers?: TestServers }).testServers?.stop();
}
