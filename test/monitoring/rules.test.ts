import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { PROMETHEUS_RULE_FILE, prometheusRule, RULES_FILE } from '../../scripts/monitoring.ts';
import { metricNames, promtool, rulesOf } from './promql.js';

/**
 * The alert rules (k8s/monitoring/rules.yml) as Prometheus's own tools judge them: valid, and each
 * alert firing on its fault's series and silent on healthy ones (rules.promtool.yml); the
 * PrometheusRule is the same rules; every alert has its runbook.
 */

const UNIT_TESTS = new URL('./rules.promtool.yml', import.meta.url).pathname;
const RUNBOOKS = new URL('../../docs/runbooks.md', import.meta.url).pathname;

const run = (...args: string[]) => execFileSync(promtool, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

test('promtool check rules accepts the rules file, and the PrometheusRule\'s rules', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'prometheus-rule-'));
  try {
    const operatorRules = path.join(root, 'rules.yml');
    writeFileSync(operatorRules, stringify({ groups: (parse(readFileSync(PROMETHEUS_RULE_FILE, 'utf8')) as { spec: { groups: unknown } }).spec.groups }));
    expect(run('check', 'rules', RULES_FILE, operatorRules)).toMatch(/SUCCESS: 20 rules found[\s\S]*SUCCESS: 20 rules found/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('promtool test rules: each alert fires on its fault and not on healthy series', () => {
  expect(run('test', 'rules', UNIT_TESTS)).toContain('SUCCESS');
});

test('every alert has a unit test case that sees it fire', () => {
  const cases = (parse(readFileSync(UNIT_TESTS, 'utf8')) as { tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[] }).tests;
  const seenFiring = new Set(cases.flatMap((unit) => unit.alert_rule_test ?? []).filter((check) => check.exp_alerts.length > 0).map((check) => check.alertname));
  const alerts = rulesOf().flatMap((rule) => rule.alert ?? []);
  expect(alerts.filter((alert) => !seenFiring.has(alert))).toEqual([]);
});

test('the PrometheusRule is what `npm run monitoring` makes of the rules file now', () => {
  expect(readFileSync(PROMETHEUS_RULE_FILE, 'utf8')).toBe(prometheusRule(readFileSync(RULES_FILE, 'utf8')));
});

test('every alert has a severity and a runbook section in docs/runbooks.md', () => {
  const headings = new Set([...readFileSync(RUNBOOKS, 'utf8').matchAll(/^#{2,4} (.+)$/gm)].map(([, heading]) => heading!.trim().toLowerCase().replace(/[^a-z0-9 -]/g, '').replaceAll(' ', '-')));
  for (const rule of rulesOf().filter((r) => r.alert)) {
    expect({ alert: rule.alert, severity: rule.labels?.severity }).toEqual({ alert: rule.alert, severity: expect.stringMatching(/^(page|ticket)$/) });
    const [file, anchor] = (rule.annotations?.runbook ?? '').split('#');
    expect({ alert: rule.alert, file, known: headings.has(anchor ?? '') }).toEqual({ alert: rule.alert, file: 'docs/runbooks.md', known: true });
  }
});

test('metricNames reads the selected metrics, not functions, labels or keywords', () => {
  expect(metricNames('sum by (job) (rate(a_total{le="0.5"}[5m])) / on (slo) group_left () (2 * b:c:ratio) unless up == 0').sort()).toEqual(['a_total', 'b:c:ratio', 'up']);
  expect(() => metricNames('sum(rate(a[5m])')).toThrow(/not PromQL/);
});
