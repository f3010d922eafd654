import { ConfigError, connectionBudgetOf, loadConfig } from '@app/shared/platform/config';
import { serve } from '@app/shared/platform/server';
import { configSchema } from './config.js';
import { createGateway, type Gateway } from './gateway.js';

const config = loadConfig(configSchema);
let gateway: Gateway;
try {
  gateway = createGateway(config);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
const { logger } = gateway;
process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'));
// A token revoked before this replica started is refused by its first request.
await gateway.ready;
await serve({
  name: 'gateway',
  handler: gateway.handler,
  port: config.PORT,
  host: config.HOST,
  metrics: { handler: gateway.metricsHandler, port: config.METRICS_PORT, host: config.METRICS_HOST },
  lifecycle: gateway.lifecycle,
  logger,
  shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
  listenSockets: config.LISTEN_SOCKETS,
  connections: connectionBudgetOf(config, config.MAX_CONNECTIONS_PER_ADDRESS),
  release: gateway.release,
  details: gateway.details,
});
