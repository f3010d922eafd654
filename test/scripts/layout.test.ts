/**
 * `npm run layout` (dependency-cruiser, .dependency-cruiser.js): no import circles between modules or
 * folders, every import resolved and declared by its workspace's package.json.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const ROOT = new URL('../..', import.meta.url).pathname;
const { scripts } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
  cycle?: { name: string }[];
}

/** The layout script as npm runs it (its shell expands the folder patterns), with `extra` arguments, as a list of violations. */
function layout(...extra: string[]): Violation[] {
  const run = spawnSync('sh', ['-c', `${scripts.layout} --output-type json ${extra.join(' ')}`], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}` },
    maxBuffer: 256 * 1024 * 1024,
    timeout: 60_000,
  });
  expect(run.stderr).toBe('');
  return (JSON.parse(run.stdout) as { summary: { violations: Violation[] } }).summary.violations;
}

const described = (violations: Violation[]) => violations.map(({ rule, from, to, cycle }) => `${rule.name}: ${from} → ${cycle ? cycle.map(({ name }) => name).join(' → ') : to}`);

describe('npm run layout', () => {
  it('finds no circle and no undeclared or unresolved import in the tree', () => {
    expect(described(layout())).toEqual([]);
  });

  it('finds a circle of type-only imports planted beside the tree', async () => {
    const planted = await mkdtemp(path.join(os.tmpdir(), 'layout-circle-'));
    try {
      await writeFile(path.join(planted, 'a.ts'), "import type { B } from './b.ts';\nexport interface A { b?: B }\n");
      await writeFile(path.join(planted, 'b.ts'), "import type { A } from './a.ts';\nexport interface B { a?: A }\n");
      const found = layout(planted).filter(({ rule, from }) => rule.name === 'no-circular' && from.includes(path.basename(planted)));
      expect(found.map(({ from, cycle = [] }) => [from, ...cycle.map(({ name }) => name)].map((file) => path.basename(file)))).toEqual([['a.ts', 'b.ts', 'a.ts']]);
    } finally {
      await rm(planted, { recursive: true, force: true });
    }
  });
});
