/**
 * The parts of a Markdown document the docs checks read: its code (fenced blocks and inline code),
 * its prose, its tables and its sections, each with the line it starts on. Pure: text in, parts out.
 */

/** A document: its path from the repository root and its text. */
export interface Doc {
  file: string;
  text: string;
}

/** What a check found wrong: where, and what. */
export interface Mismatch {
  file: string;
  line: number;
  message: string;
}

/** A line of a document, with what surrounds it. */
export interface Line {
  line: number;
  text: string;
  /** Inside a fenced code block (the fence lines themselves are not returned). */
  fenced: boolean;
  /** The heading of the section it is in ('' before the first). */
  section: string;
}

export function linesOf(doc: Doc): Line[] {
  const lines: Line[] = [];
  let fenced = false;
  let section = '';
  doc.text.split('\n').forEach((text, index) => {
    if (/^\s*```/.test(text)) {
      fenced = !fenced;
      return;
    }
    const heading = !fenced && /^#{1,6}\s+(.*)$/.exec(text);
    if (heading) section = heading[1]!.trim();
    lines.push({ line: index + 1, text, fenced, section });
  });
  return lines;
}

/** A piece of code: one line of a fenced block, or one inline code span (its line breaks made spaces). */
export interface CodeSpan {
  line: number;
  text: string;
  fenced: boolean;
  section: string;
}

/** The prose of a paragraph: consecutive unfenced, non-blank lines. */
interface Paragraph {
  lines: Line[];
}

function paragraphsOf(lines: Line[]): Paragraph[] {
  const paragraphs: Paragraph[] = [];
  let current: Line[] = [];
  for (const line of lines) {
    if (line.fenced || line.text.trim() === '') {
      if (current.length > 0) paragraphs.push({ lines: current });
      current = [];
    } else current.push(line);
  }
  if (current.length > 0) paragraphs.push({ lines: current });
  return paragraphs;
}

const INLINE_CODE = /(`+)([\s\S]*?[^`])\1(?!`)/g;

/** Every code span of a document, in order: fenced lines and inline code, which may wrap. */
export function codeSpansOf(doc: Doc): CodeSpan[] {
  const lines = linesOf(doc);
  const spans: CodeSpan[] = lines.filter((line) => line.fenced).map(({ line, text, section }) => ({ line, text, fenced: true, section }));
  for (const paragraph of paragraphsOf(lines)) {
    const text = paragraph.lines.map((line) => line.text).join('\n');
    for (const match of text.matchAll(INLINE_CODE)) {
      const line = paragraph.lines[text.slice(0, match.index).split('\n').length - 1]!;
      spans.push({ line: line.line, text: match[2]!.replaceAll('\n', ' ').trim(), fenced: false, section: line.section });
    }
  }
  return spans.sort((a, b) => a.line - b.line);
}

/** The cells of a table row (`| a | b |`), split on pipes outside inline code and not escaped. */
export function cellsOf(row: string): string[] {
  const cells: string[] = [];
  let cell = '';
  let inCode = false;
  for (let i = 0; i < row.length; i++) {
    const char = row[i]!;
    if (char === '\\' && row[i + 1] === '|') {
      cell += '|';
      i++;
    } else if (char === '`') {
      inCode = !inCode;
      cell += char;
    } else if (char === '|' && !inCode) {
      cells.push(cell.trim());
      cell = '';
    } else cell += char;
  }
  cells.push(cell.trim());
  return cells.slice(1, -1);
}

/** A table: its header's cells and its rows' cells, each row with its line. */
export interface Table {
  header: string[];
  rows: { line: number; cells: string[] }[];
  section: string;
  firstLine: number;
}

export function tablesOf(doc: Doc): Table[] {
  const tables: Table[] = [];
  let table: Table | undefined;
  for (const line of linesOf(doc)) {
    const isRow = !line.fenced && line.text.trimStart().startsWith('|');
    if (!isRow) table = undefined;
    else if (table === undefined) {
      table = { header: cellsOf(line.text.trim()), rows: [], section: line.section, firstLine: line.line };
      tables.push(table);
    } else if (!/^\|[\s|:-]+\|$/.test(line.text.trim())) table.rows.push({ line: line.line, cells: cellsOf(line.text.trim()) });
  }
  return tables;
}

/** A configuration table: one whose first column is headed "Variable" (or "… variable"). */
export const isVariableTable = (table: Table) => /(^|\s)variable$/i.test(table.header[0] ?? '');

/** The backticked names in a cell: `A`, `B` and `C` → A, B, C. */
export const namesIn = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map(([, name]) => name!);
