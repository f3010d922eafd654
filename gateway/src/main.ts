import { loadConfig } from '@app/shared/config';
import { Lifecycle } from '@app/shared/http';
import { createLogger } from '@app/shared/logger';
import { listen, stopOnSignals } from '@app/shared/server';
import { createApp, upstreamsFrom } from './app.js';
import { configSchema } from './config.js';

const config = loadConfig(configSchema);
const logger = createLogger('gateway', config.LOG_LEVEL);
process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'));
const lifecycle = new Lifecycle();
const upstreams = upstreamsFrom(config);
const app = createApp({ upstreams, upstreamTimeoutMs: config.UPSTREAM_TIMEOUT_MS, logger, lifecycle });
const running = await listen(app, config.PORT);
logger.info({ port: running.port, upstreams: upstreams.map(({ name, url }) => ({ name, url })) }, 'gateway listening');
stopOnSignals({ running, lifecycle, logger, shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS, release: async () => undefined });
