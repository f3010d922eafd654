/**
 * Kind 8 of the docs check: each thing is explained once. A run of RUN_WORDS consecutive words that
 * appears twice, in two docs or in one, is the same explanation in two places. Code blocks and
 * configuration tables are left out: a command or a variable's row may have to be shown where it
 * is used, and a code block quotes rather than explains.
 */
import { isVariableTable, linesOf, tablesOf, type Doc } from './markdown.js';

/** How many words make a run: a clause, longer than the phrases the docs share by design ("with its protections on"). */
export const RUN_WORDS = 12;

interface Word {
  word: string;
  line: number;
}

/** A doc's explaining words: prose and tables but configuration tables, lower-cased, without markdown or punctuation. */
function wordsOf(doc: Doc): Word[] {
  const configurationRows = new Set(tablesOf(doc).filter(isVariableTable).flatMap((table) => [table.firstLine, table.firstLine + 1, ...table.rows.map((row) => row.line)]));
  return linesOf(doc)
    .filter((line) => !line.fenced && !configurationRows.has(line.line))
    .flatMap(({ text, line }) =>
      [...text.replaceAll(/\]\([^)]*\)/g, ']').toLowerCase().matchAll(/[\p{L}\p{N}_]+/gu)].map(([word]) => ({ word, line })),
    );
}

/** The same words in two places: each place's file and line, and the words. */
export interface Duplicate {
  first: { file: string; line: number };
  second: { file: string; line: number };
  words: string;
}

/** Kind 8: every run of at least RUN_WORDS words found twice, as long as it goes on. */
export function duplicates(docs: Doc[]): Duplicate[] {
  const words = docs.map((doc) => ({ file: doc.file, words: wordsOf(doc) }));
  const seen = new Map<string, { doc: number; at: number }[]>();
  words.forEach(({ words: list }, doc) => {
    for (let at = 0; at + RUN_WORDS <= list.length; at++) {
      const key = list.slice(at, at + RUN_WORDS).map(({ word }) => word).join(' ');
      seen.set(key, [...(seen.get(key) ?? []), { doc, at }]);
    }
  });
  // Every pair of places a run starts at; then each run once, as long as it goes on.
  const pairs = [...seen.values()].flatMap((places) =>
    places.flatMap((a, i) => places.slice(i + 1).filter((b) => a.doc !== b.doc || b.at - a.at >= RUN_WORDS).map((b) => ({ a, b }))),
  );
  pairs.sort((x, y) => x.a.doc - y.a.doc || x.b.doc - y.b.doc || x.b.at - x.a.at - (y.b.at - y.a.at) || x.a.at - y.a.at);
  const found: Duplicate[] = [];
  let last: { a: { doc: number; at: number }; b: { doc: number; at: number } } | undefined;
  for (const pair of pairs) {
    const { a, b } = pair;
    const list = words[a.doc]!.words;
    const continues = last && last.a.doc === a.doc && last.b.doc === b.doc && last.a.at + 1 === a.at && last.b.at + 1 === b.at;
    if (continues) found.at(-1)!.words += ` ${list[a.at + RUN_WORDS - 1]!.word}`;
    else {
      const at = (place: { doc: number; at: number }) => ({ file: words[place.doc]!.file, line: words[place.doc]!.words[place.at]!.line });
      found.push({ first: at(a), second: at(b), words: list.slice(a.at, a.at + RUN_WORDS).map(({ word }) => word).join(' ') });
    }
    last = pair;
  }
  return found;
}
