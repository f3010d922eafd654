import { defineFeature } from '../feature.js';
import { loadSheddingConfig } from './config.js';
import { overloadMetrics } from './metrics.js';
import { containerMemoryLimitBytes, OverloadManager, overloadConfigProblems, overloadSettings } from './overload.js';
import { overloadStage } from './overload-stage.js';

/**
 * Load shedding: the overload manager (memory on a timer, its level on /metrics) and its stage,
 * first of all; and each service's share of slots, which the proxy's hops keep (concurrency-limit.ts).
 */
export const loadShedding = defineFeature({
  name: 'load shedding',
  config: loadSheddingConfig,
  // A 503 for want of memory or of a slot says when to come back.
  exposedHeaders: ['Retry-After'],
  configProblems: (config) => overloadConfigProblems(config),
  create({ config, logger, metrics, writer, parts, shared }) {
    const overload = new OverloadManager(overloadSettings(config, containerMemoryLimitBytes()), { logger, read: parts.readMemory });
    const countShed = overloadMetrics(metrics, overload);
    overload.start();
    shared.pressure = overload;
    shared.concurrency = { limit: config.UPSTREAM_CONCURRENCY_LIMIT, writeShare: config.UPSTREAM_WRITE_SHARE_PERCENT / 100 };
    return {
      name: 'load shedding',
      stages: { arrive: overloadStage(overload, writer, countShed) },
      details: { memory: overload.settings },
      release: () => overload.stop(),
    };
  },
});
