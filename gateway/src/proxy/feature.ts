import type { Exchange } from '../exchange.js';
import { proxyDescription } from './description.js';
import { defineFeature, type FeatureContext, type SettingsOf } from '../feature.js';
import { proxyConfig } from './config.js';
import { hopCounters, observeLimits } from './metrics.js';
import { ServiceHop } from './service-hop.js';
import { proxyStage } from './stage.js';
import { probeByConnecting, ReplicaHealth, upstreamAgent } from './upstream-agent.js';

/** One hop per upstream, by name: its agents, proxy and concurrency limit (service-hop.ts). */
function serviceHops(context: FeatureContext<SettingsOf<typeof proxyConfig>>): Map<string, ServiceHop> {
  const { config, upstreams, writer, metrics, parts, shared } = context;
  const health = new ReplicaHealth(Date.now, probeByConnecting);
  const counters = hopCounters(metrics);
  const deadlines = { upstreamMs: config.UPSTREAM_TIMEOUT_MS, requestBodyMs: config.REQUEST_BODY_TIMEOUT_MS };
  shared.deadlines = deadlines;
  const { concurrency } = shared;
  if (!concurrency) throw new Error('The proxy keeps the slots load shedding shares out: list load shedding before it (features.ts)');
  // The cache, made after the proxy, says what a write renews (shared.onWriteSettled).
  const onSettled = (exchange: Exchange, status: number) => shared.onWriteSettled?.(exchange, status);
  const hops = new Map(
    upstreams.map((upstream) => {
      const agent = upstreamAgent(upstream.url, { resolve: parts.resolveReplicas, health });
      const retryAgent = upstreamAgent(upstream.url, { resolve: parts.resolveReplicas, health, fresh: true });
      const hop = new ServiceHop(upstream, { deadlines, agent, retryAgent, concurrency, writer, onShed: counters.shed, onRetry: counters.upstreamRetry, onSettled });
      return [upstream.name, hop];
    }),
  );
  observeLimits(metrics, [...hops.values()].map(({ limit }) => limit));
  return hops;
}

/** The way to each service: body in, a slot, the proxy, retries; every request no earlier stage answered goes there. */
export const proxy = defineFeature({
  name: 'proxy',
  config: proxyConfig,
  description: proxyDescription,
  create(context) {
    const hops = serviceHops(context);
    context.shared.hops = hops;
    return {
      name: 'proxy',
      stages: { forward: proxyStage(hops) },
      details: { upstreams: context.upstreams.map(({ name, url, cachedReads }) => ({ name, url, cachedReads })) },
      release: () => {
        for (const hop of hops.values()) hop.close();
      },
    };
  },
});
