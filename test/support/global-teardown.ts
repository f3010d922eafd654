import type { TestServers } from './global-setup.js';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { testServers?: TestServers }).testServers?.stop();
}
