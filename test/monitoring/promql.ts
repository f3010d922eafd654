import { parser } from '@prometheus-io/lezer-promql';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { findProgram } from '../../scripts/setup/machine.ts';
import { RULES_FILE } from '../../scripts/monitoring.ts';

/** promtool, from where `npm test` provides it (scripts/setup/needs.ts, "Prometheus"). */
export const promtool = findProgram('promtool') ?? 'promtool';

export interface Rule {
  record?: string;
  alert?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** The rules of k8s/monitoring/rules.yml, every group's. */
export function rulesOf(text = readFileSync(RULES_FILE, 'utf8')): Rule[] {
  return (parse(text) as { groups: { rules: Rule[] }[] }).groups.flatMap((group) => group.rules);
}

/** The metric names a PromQL expression selects, read with Prometheus's own grammar (the one its UI uses). */
export function metricNames(expr: string): string[] {
  const names = new Set<string>();
  const tree = parser.parse(expr);
  tree.iterate({
    enter: (node) => {
      if (node.type.isError) throw new Error(`not PromQL at ${node.from}: ${expr}`);
      if (node.name === 'VectorSelector') {
        const identifier = node.node.getChild('Identifier');
        if (identifier) names.add(expr.slice(identifier.from, identifier.to));
      }
    },
  });
  return [...names];
}
