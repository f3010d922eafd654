/**
 * Every repository path a code comment names exists: a comment that points at a file after it is
 * gone or split sends its reader nowhere. A path from the root (one that starts with a top-level
 * folder) must be that file; a shorter one (a file name, or the end of a path) must end the path of
 * a file in the same top-level folder as the comment (the same workspace), or at the root. Files that only a run
 * writes (ignored by git, as `bench/results/`) count too.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from '../../tools/process.js';

const tracked = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((file) => file !== '' && existsSync(path.join(ROOT, file)));
const sources = tracked.filter((file) => /\.(ts|js|mjs|sh)$/.test(file) && !file.endsWith('.d.ts'));

/** The comments of a source file: `//` to the end of the line, `/* … *\/` blocks, and `#` lines of a shell script. */
function commentsOf(file: string): string {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  if (file.endsWith('.sh')) return text.split('\n').filter((line) => /^\s*#/.test(line)).join('\n');
  return [...text.matchAll(/\/\*[\s\S]*?\*\/|(?<![:'"`\w])\/\/[^\n]*/g)].map(([comment]) => comment).join('\n');
}

/** Repository paths a comment names: a word ending in the extension of a source, document or setting file. */
function namedPaths(comments: string): string[] {
  const names = [...comments.matchAll(/(?<![\w./@:-])((?:[\w-]+\/)*[\w.-]+\.(?:ts|js|mjs|json|md|ya?ml|sh))(?![\w/])/g)].map(([, name]) => name!);
  // Not paths of this repository: packages' files, URLs, globs and examples.
  return names.filter((name) => !/^(node_modules|dist)\//.test(name) && !name.includes('*') && !/^(res|req)\.\w+$/.test(name));
}

const topFolders = new Set(tracked.filter((file) => file.includes('/')).map((file) => file.split('/', 1)[0]!));
const ignoredByGit = (name: string) => {
  try {
    execFileSync('git', ['check-ignore', '-q', name], { cwd: ROOT });
    return true;
  } catch {
    return false;
  }
};

function exists(name: string, from: string): boolean {
  if (topFolders.has(name.split('/', 1)[0]!)) return tracked.includes(name) || ignoredByGit(name);
  const folder = from.includes('/') ? `${from.split('/', 1)[0]}/` : '';
  return tracked.some((file) => file === name || (file.endsWith(`/${name}`) && (file.startsWith(folder) || !file.includes('/'))));
}

test.each(sources)('%s: every path its comments name exists', (file) => {
  const missing = namedPaths(commentsOf(file)).filter((name) => !exists(name, file));
  expect(missing).toEqual([]);
});
