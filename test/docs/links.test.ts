/**
 * Every link in the repository's Markdown resolves inside the repository: a relative link to a
 * file that exists (not above the root), its #anchor to a heading there; a web link only to the
 * gateway on this machine. And the README stays a page people read: at most 250 lines.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from '../../tools/process.js';

const markdownFiles = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((file) => file !== '' && existsSync(path.join(ROOT, file)));

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replaceAll(/[^\p{L}\p{N} _-]/gu, '')
    .replaceAll(' ', '-');

function anchorsIn(file: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
    if (heading) anchors.add(anchorOf(heading[1]!));
  }
  return anchors;
}

/** The links of a Markdown file, outside code: `[text](target)` and `<scheme://…>`. */
function linksIn(file: string): string[] {
  const text = readFileSync(path.join(ROOT, file), 'utf8').replaceAll(/```[\s\S]*?```/g, '').replaceAll(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)|<(https?:\/\/[^>\s]+)>/g)].map(([, inline, auto]) => (inline ?? auto)!);
}

test.each(markdownFiles)('%s: every link resolves inside the repository', (file) => {
  const broken = linksIn(file).filter((link) => {
    if (/^https?:\/\//.test(link)) return !/^https?:\/\/(localhost|127\.0\.0\.1)[:/]/.test(link);
    const [target = '', anchor] = link.split('#');
    const resolved = target === '' ? path.join(ROOT, file) : path.resolve(ROOT, path.dirname(file), decodeURIComponent(target));
    if (path.relative(ROOT, resolved).startsWith('..') || !existsSync(resolved)) return true;
    return anchor !== undefined && resolved.endsWith('.md') && !anchorsIn(resolved).has(anchor);
  });
  expect(broken).toEqual([]);
});

test('README.md is at most 250 lines', () => {
  expect(readFileSync(path.join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length).toBeLessThanOrEqual(250);
});
