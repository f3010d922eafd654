/**
 * The "## Layout" block of docs/architecture.md read as a tree: indentation is nesting, a name
 * ending in `/` is a folder its indented lines are in, and a line indented deeper than a child would
 * be goes on the description above it. An entry may list several names (`users-service/,
 * products-service/`); a description may name files too, in the folder of its entry.
 * `<name>` and `*` stand for any part of a name. Pure: the block's lines and the repository's
 * files in, what the block names out.
 */
import type { Line } from './markdown.js';

/** A name the block gives, and the files it stands for (none: it names nothing that exists). */
export interface Named {
  line: number;
  name: string;
  files: string[];
}

/** What a description names: a source file, not a doc, a folder or a package's path. */
const SOURCE = /\.(ts|mjs|js|lua|sh)$/;
const PATH_LIKE = /^[\w.<>*-]*[\w<>*-](\/[\w.<>*-]+)*\/?$/;

/** A word as a name: quotes, brackets and trailing punctuation dropped. */
const nameOf = (word: string) => word.replace(/^[`("'[]+/, '').replace(/[`)"'\],;:.]+$/, '');

/** The files `name` stands for from `base` (a folder with its slash, or '' for the root). */
function filesOf(base: string, name: string, files: string[]): string[] {
  const body = (base + name).replaceAll(/[.+?^$()|[\]\\]/g, '\\$&').replaceAll('*', '[^/]*').replaceAll(/<[^>]*>/g, '[^/]+');
  const pattern = new RegExp(`^${body}${name.endsWith('/') ? '' : '$'}`);
  return files.filter((file) => pattern.test(file));
}

/** The entry's own names (the words at its start, one after another while each ends with a comma) and the rest: its description. */
function entryNames(text: string): { names: string[]; description: string } {
  const words = text.trim().split(/\s+/);
  const names: string[] = [];
  for (const word of words) {
    const name = nameOf(word);
    if (!PATH_LIKE.test(name) || !(name.includes('/') || /\.\w+$/.test(name))) break;
    names.push(name);
    if (!word.endsWith(',')) break;
  }
  return { names, description: words.slice(names.length).join(' ') };
}

/** The source files a description names, each found from the nearest of `levels` (folders side by side) that has it, or ending the path of one under the first. */
function describedFiles(text: string, levels: string[][], files: string[], line: number): Named[] {
  return text
    .split(/\s+/)
    .map(nameOf)
    .filter((name) => SOURCE.test(name) && PATH_LIKE.test(name) && !name.includes('*'))
    .map((name) => {
      for (const folders of levels) {
        const found = folders.flatMap((base) => filesOf(base, name, files));
        if (found.length > 0) return { line, name, files: found };
      }
      const under = files.filter((file) => levels[0]!.some((base) => file.startsWith(base)) && file.endsWith(`/${name}`));
      return { line, name, files: under };
    });
}

interface Open {
  indent: number;
  /** The folders the entry's lines are in: its own when it names folders, else the one it is in. */
  folders: string[];
  /** The folders its descriptions look in, a level at a time: nearest first, the root last. */
  lookIn: string[][];
}

/** Everything the block's lines name, entries and descriptions alike. */
export function namedByLayout(lines: Pick<Line, 'line' | 'text'>[], files: string[]): Named[] {
  const named: Named[] = [];
  const open: Open[] = [];
  for (const { line, text } of lines) {
    if (text.trim() === '') continue;
    const indent = text.length - text.trimStart().length;
    const last = open.at(-1);
    if (last && indent > last.indent + 2) {
      named.push(...describedFiles(text, last.lookIn, files, line));
      continue;
    }
    while (open.length > 0 && open.at(-1)!.indent >= indent) open.pop();
    const parents = open.at(-1)?.folders ?? [''];
    const { names, description } = entryNames(text);
    const own = names.flatMap((name) => parents.map((parent) => ({ name, path: parent + name })));
    for (const { name, path } of own) named.push({ line, name, files: filesOf('', path, files) });
    const folders = own.filter(({ path }) => path.endsWith('/')).map(({ path }) => path);
    const here = own.map(({ path }) => path.slice(0, path.lastIndexOf('/') + 1));
    const lookIn = [[...new Set(here)], parents, ...open.map((one) => one.folders).reverse(), ['']];
    open.push({ indent, folders: folders.length > 0 ? folders : parents, lookIn });
    named.push(...describedFiles(description, lookIn, files, line));
  }
  return named;
}
