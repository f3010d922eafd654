import parsePrometheusTextFormat from 'parse-prometheus-text-format';

/** One sample of a /metrics page: its labels and its value. */
export interface MetricSample {
  labels: Record<string, string>;
  value: number;
}

/**
 * A Prometheus text page (a process's /metrics), read with a parser: `samples(name)` lists a
 * counter's or gauge's samples, `value(name, labels)` sums those whose labels include `labels` (0
 * when none). Not for histograms: the parser merges the series of one whose `le` label comes
 * first, as prom-client writes it.
 */
export function readMetrics(text: string) {
  const families = new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family]));
  const samples = (name: string): MetricSample[] =>
    (families.get(name)?.metrics ?? []).map((sample) => ({ labels: sample.labels ?? {}, value: Number(sample.value) }));
  const value = (name: string, labels: Record<string, string> = {}) =>
    samples(name)
      .filter((sample) => Object.entries(labels).every(([label, wanted]) => sample.labels[label] === wanted))
      .reduce((sum, sample) => sum + sample.value, 0);
  return { samples, value, has: (name: string) => families.has(name) };
}
