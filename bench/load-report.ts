/** What the load curve prints: each step's figures, the recovery after the Redis cut, and a Markdown table of them all. */
import type { RedisState, Recovery, Step } from './load-stats.ts';

export function printStep(step: Step): void {
  const list = (record: Record<string, number>) => Object.entries(record).map(([k, v]) => `${k}: ${v}`).join(', ');
  console.log(`\n${step.connections} connections: goodput ${step.goodput}/s (all ${step.requestsPerSecond}/s), p50 ${step.p50Ms} ms, p99 ${step.p99Ms} ms, max ${step.maxMs} ms`);
  if (step.rounds.length > 1) console.log(`  rounds: goodput ${step.rounds.map((r) => r.goodput).join(' / ')}/s, p99 ${step.rounds.map((r) => Math.round(r.p99Ms)).join(' / ')} ms`);
  const { writes } = step;
  console.log(
    `  writes: ${writes.answered} answered, ${writes.shed} shed by the gateway (${writes.shedPercent}%${step.rounds.length > 1 ? `; rounds ${step.rounds.map((r) => r.writesShedPercent).join(' / ')}%` : ''}), ${writes.unavailable} answered 503 in all`,
  );
  console.log(`  statuses: ${list(step.statuses)}; 503 with Retry-After: ${step.retryAfter503}; client errors: ${list(step.clientErrors)}`);
  console.log(`  X-Cache: ${list(step.xCache)}`);
  console.log(`  gateway counters: ${list(step.gateway)}`);
  for (const [name, delay] of Object.entries(step.eventLoopDelay)) {
    console.log(`  event-loop delay ${name}: ${delay ? `p50 ${delay.p50Ms} ms, p99 ${delay.p99Ms} ms, max ${delay.maxMs} ms` : 'no answer'}`);
  }
  const { max, lastWaitingSecond } = step.acceptQueue;
  console.log(
    `  connections waiting for the gateway to take them in (its accept queues): at most ${max}${lastWaitingSecond === null ? '' : `, the last seen ${lastWaitingSecond} s into the step`}`,
  );
  console.log(
    `  CPU seconds: ${Object.entries(step.cpuSeconds).map(([name, seconds]) => `${name} ${seconds}`).join(', ')}; the gateway's per request: ${step.gatewayCpuMicrosPerRequest} µs`,
  );
  console.log(`  RSS (MB, now/peak): ${Object.entries(step.memory).map(([name, m]) => `${name} ${m ? `${m.rssMb}/${m.peakMb}` : '-'}`).join(', ')}`);
}

/** The Redis cut: what the gateway said of Redis around it, the cut's step, and the moments of its recovery. */
export function printCut(cut: { connections: number; forMs: number; step: Step; states: RedisState[]; restoredAt: number; recovery: Recovery; bestStep: Step }): void {
  const { recovery, bestStep } = cut;
  console.log(`  the gateway on Redis (ms after Redis came back: up, owed): ${cut.states.map((c) => `${c.atMs - cut.restoredAt}: ${c.redisUp}, ${c.owed}`).join('; ')}`);
  console.log(`\nRedis cut for ${cut.forMs / 1000} s at ${cut.connections} connections (the best step's):`);
  printStep(cut.step);
  console.log(`  per second (second 0 = the one Redis came back in), good/shed/bypassed/hits: ${recovery.perSecond.map((p) => `${p.second}: ${p.goodput}/${p.shed}/${p.bypassed}/${p.hits}`).join(', ')}`);
  console.log(
    `  after Redis returned: judged up by the gateway ${recovery.msToRedisJudgedUp ?? 'never'} ms later (as /metrics said it); hits at half their rate before the cut again by ${recovery.secondsToHitsBack ?? 'never'} s after`,
  );
  console.log(
    `  a whole second at the best step's goodput (${bestStep.goodput}/s, ${bestStep.connections} connections) again by ${recovery.secondsToBest ?? 'never'} s after Redis returned; at 90% of it by ${recovery.secondsTo90PercentOfBest ?? 'never'} s; at this run's own goodput before the cut (${recovery.goodputBeforeCut}/s on average) by ${recovery.secondsToGoodputBeforeCut ?? 'never'} s`,
  );
}

/** The figures as a Markdown table, for the README. */
export function markdown(steps: Step[], cut: Step, recovery: { perSecond: { second: number; goodput: number }[] }): string {
  const n = (value: number) => Math.round(value).toLocaleString('en-US');
  const others = (s: Step) =>
    Object.entries(s.statuses)
      .filter(([status]) => status !== '200')
      .map(([status, count]) => `${n(count)} × ${status}`)
      .join(', ') || '—';
  const delay = (s: Step, name: string) => {
    const d = s.eventLoopDelay[name];
    return d ? `${Math.round(d.p99Ms)}` : '—';
  };
  const rss = (s: Step, name: string) => s.memory[name]?.peakMb ?? '—';
  const row = (label: string, s: Step) =>
    `| ${label} | ${n(s.goodput)} | ${s.writes.shedPercent}% | ${n(s.p50Ms)} ms | ${n(s.p99Ms)} ms | ${others(s)} | ${n(s.xCache.HIT ?? 0)} / ${n(s.xCache.MISS ?? 0)} / ${n(s.xCache.BYPASS ?? 0)} | ${Object.values(s.clientErrors).reduce((a, b) => a + b, 0)} | ${delay(s, 'gateway')} / ${delay(s, 'products-service')} ms | ${rss(s, 'gateway')} / ${rss(s, 'products-service')} MB |`;
  return [
    '| connections | goodput/s | writes shed | p50 | p99 | non-200 | HIT / MISS / BYPASS | client errors, timeouts | event-loop delay p99, gateway / products | peak RSS, gateway / products |',
    '|---:|---:|---:|---:|---:|---|---|---:|---|---|',
    ...steps.map((s) => row(n(s.connections), s)),
    row(`${n(cut.connections)}, Redis cut 2 s`, cut),
    '',
    `Goodput per round: ${steps.map((s) => `${n(s.connections)}: ${s.rounds.map((r) => n(r.goodput)).join(' / ')}`).join('; ')}.`,
    '',
    `Writes shed per round: ${steps.map((s) => `${n(s.connections)}: ${s.rounds.map((r) => `${r.writesShedPercent}%`).join(' / ')}`).join('; ')}.`,
    '',
    `Around the cut, 2xx per second (0 = the second Redis came back in): ${recovery.perSecond.map((p) => `${p.second}: ${n(p.goodput)}`).join(', ')}.`,
  ].join('\n');
}
