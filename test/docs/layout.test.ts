/**
 * The layout in docs/architecture.md is the tree's: every file its "## Layout" block names exists,
 * and every source file of the gateway, of shared/ and of a service is named there (layout.ts reads
 * the block). Each fault is planted once into a copy of the block or of the tree to see it found.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { namedByLayout, type Named } from './layout.js';
import { linesOf } from './markdown.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const DOC = 'docs/architecture.md';
const block = linesOf({ file: DOC, text: readFileSync(path.join(ROOT, DOC), 'utf8') }).filter(({ section, fenced }) => section === 'Layout' && fenced);

/** The repository's files, committed or not (a new file counts before its commit), that are there. */
const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((file) => file !== '' && existsSync(path.join(ROOT, file)));

/** The folders whose every file the block must name: the gateway's, shared/'s and each service's sources. */
const sourceFolders = ['gateway/src/', 'shared/src/', ...readdirSync(ROOT).filter((name) => name.endsWith('-service')).map((name) => `${name}/src/`)];

const missing = (named: Named[]) => named.filter(({ files: found }) => found.length === 0).map(({ line, name }) => `${DOC}:${line}: ${name}: no such file`);
/**
 * The gateway's feature folders, as gateway/src/features.ts loads them (one line a feature): a
 * feature's folder is laid out by that list and by its own feature module, so a new one needs no
 * line here; a folder the block names has every file named all the same.
 */
const FEATURE_LIST = readFileSync(path.join(ROOT, 'gateway/src/features.ts'), 'utf8');
const featureFolders = (list: string) => [...list.matchAll(/import\('\.\/([\w-]+)\/feature\.js'\)/g)].map(([, folder]) => `gateway/src/${folder}/`);

function unnamed(named: Named[], tree: string[], list = FEATURE_LIST): string[] {
  // A folder's entry says what the folder is for; its files are named one by one.
  const covered = new Set(named.filter(({ name }) => !name.endsWith('/')).flatMap(({ files: found }) => found));
  const folderEntries = named.filter(({ name, files: found }) => name.endsWith('/') && found.length > 0);
  const selfLaidOut = featureFolders(list).filter((folder) => !folderEntries.some(({ files: found }) => found.every((file) => file.startsWith(folder))));
  return tree
    .filter((file) => sourceFolders.some((folder) => file.startsWith(folder)) && !covered.has(file) && !selfLaidOut.some((folder) => file.startsWith(folder)))
    .map((file) => `${file}: not in ${DOC}'s layout`);
}

describe(`the layout in ${DOC}`, () => {
  it('is there', () => {
    expect(block.length).toBeGreaterThan(20);
  });

  it('names only files that exist', () => {
    expect(missing(namedByLayout(block, files))).toEqual([]);
  });

  it('names every source file of the gateway, shared/ and the services', () => {
    expect(unnamed(namedByLayout(block, files), files)).toEqual([]);
  });

  it('finds a renamed file: the block names a file the tree no longer has', () => {
    const renamed = files.map((file) => (file === 'shared/src/platform/logger.ts' ? 'shared/src/platform/logging.ts' : file));
    const named = namedByLayout(block, renamed);
    expect(missing(named)).toEqual([expect.stringMatching(/: logger\.ts: no such file$/)]);
    expect(unnamed(named, renamed)).toEqual([`shared/src/platform/logging.ts: not in ${DOC}'s layout`]);
  });

  it('finds a file in a description that is gone, and a new file nobody listed', () => {
    const tree = [...files.filter((file) => file !== 'bench/ratios.ts'), 'gateway/src/quota.ts', 'users-service/src/quota.ts'];
    const named = namedByLayout(block, tree);
    expect(missing(named)).toEqual([expect.stringMatching(/: ratios\.ts: no such file$/)]);
    expect(unnamed(named, tree)).toEqual([`gateway/src/quota.ts: not in ${DOC}'s layout`, `users-service/src/quota.ts: not in ${DOC}'s layout`]);
  });

  it('takes a new feature folder as laid out by the feature list, and only a listed one', () => {
    const tree = [...files, 'gateway/src/quota/feature.ts', 'gateway/src/stray/feature.ts'];
    const listed = FEATURE_LIST.replace('] as const;', "  (await import('./quota/feature.js')).quota,\n] as const;");
    expect(featureFolders(listed)).toContain('gateway/src/quota/');
    expect(unnamed(namedByLayout(block, tree), tree, listed)).toEqual([`gateway/src/stray/feature.ts: not in ${DOC}'s layout`]);
  });

  it('reads nesting from indentation: a file moved under the wrong folder is not the file', () => {
    const logger = block.find(({ text }) => /^ {4}logger\.ts /.test(text))!;
    const moved = block.filter((one) => one !== logger).flatMap((one) => (/^ {4}http\/ /.test(one.text) ? [one, { ...logger, text: `  ${logger.text}` }] : [one]));
    const named = namedByLayout(moved, files);
    expect(missing(named)).toEqual([expect.stringMatching(/: logger\.ts: no such file$/)]);
    expect(unnamed(named, files)).toEqual([`shared/src/platform/logger.ts: not in ${DOC}'s layout`]);
  });
});
