/**
 * Kind 5 of the docs check: every repository path the docs name exists. As comment-paths.test.ts
 * does for code comments: a path from the root must be there (or be a file a run writes, which git
 * ignores); a shorter one (a file name, the end of a path, a folder written with its slash) must
 * end the path of one. Links are links.test.ts's.
 */
import { codeSpansOf, linesOf, type Doc, type Mismatch } from './markdown.js';

/** What the check needs of the repository: its files, and whether a path is one outside them that is there all the same. */
export interface PathFacts {
  files: string[];
  /** A file a run writes (git ignores it: `bench/results/latest.json`), or one of an installed package (`mysql2/lib/…`). */
  elsewhere: (name: string) => boolean;
}

/** The name the docs give the service `npm run new-service` would make: its paths are examples. */
const EXAMPLE_SERVICE = 'orders';

const FILE = /\.(ts|js|mjs|json|md|ya?ml|sh|sql|env|svg|lua|jwk|html)$/;

/** A word as a path: surrounding punctuation, an anchor or a line number dropped. */
const pathOf = (word: string) =>
  word
    .replace(/^[("'[]+/, '')
    .replace(/[)"'\],;:.]+$/, '')
    .replace(/#.*$/, '')
    .replace(/:\d+$/, '');

/** Whether `name` cannot be a repository path: a URL, an absolute or home path, a package's, a glob, a build's. */
const notOurs = (name: string) =>
  /:\/\/|^[/~$@]|\*|^(node_modules|dist)\/|\/dist\/|^\.\w+$/.test(name) || name.split(/[/.<>_-]/).includes(EXAMPLE_SERVICE);

function candidates(doc: Doc, tops: Set<string>): { name: string; line: number }[] {
  const fromRoot = (name: string) => tops.has(name.split('/')[0]!) && (name.includes('/') || FILE.test(name));
  const found: { name: string; line: number }[] = [];
  // Inline code that is one word: a path from the root, a file name, or a folder written with its slash.
  for (const span of codeSpansOf(doc).filter(({ fenced, text }) => !fenced && !/\s/.test(text))) {
    const name = pathOf(span.text);
    if (fromRoot(name) || FILE.test(name) || (name.endsWith('/') && /^[\w./<>-]+$/.test(name))) found.push({ name, line: span.line });
  }
  // In fenced code and prose, the words that start at a top-level folder or file: `kubectl apply -k k8s/overlays/dev`.
  for (const line of linesOf(doc)) {
    const text = line.fenced ? line.text : line.text.replaceAll(/`[^`]*`/g, ' ').replaceAll(/\]\([^)]*\)/g, ']');
    for (const word of text.split(/[\s`]+/)) if (fromRoot(pathOf(word))) found.push({ name: pathOf(word), line: line.line });
  }
  return found.filter(({ name }) => name !== '' && !notOurs(name));
}

/**
 * The files a path names, from the root or from a folder the doc is about (the `test/` of a service,
 * in docs/adding-a-service.md): itself or, a folder, what is in it; `<name>`, `{id}` and `…` stand
 * for any part.
 */
function patternOf(name: string): RegExp {
  const body = name.replaceAll(/[.+?^$()|[\]\\]/g, '\\$&').replaceAll(/<[^>]*>|\{[^}]*\}|…/g, '[^/]+');
  return new RegExp(`(^|/)${body}${name.endsWith('/') ? '' : '(/|$)'}`);
}

/** Kind 5: a path a doc names that is not in the repository. */
export function missingPaths(docs: Doc[], facts: PathFacts): Mismatch[] {
  const tops = new Set(facts.files.map((file) => file.split('/')[0]!));
  return docs.flatMap((doc) =>
    candidates(doc, tops)
      .filter(({ name }) => {
        const pattern = patternOf(name);
        return !facts.files.some((file) => pattern.test(file)) && !facts.elsewhere(name);
      })
      .map(({ name, line }) => ({ file: doc.file, line, message: `${name}: no such path in the repository` })),
  );
}
