/**
 * Kinds 6 and 7 of the docs check: every curl example of the API carries a token (or says why it
 * needs none), and figures of speed or scale stand where their date does: a README claim links the
 * dated benchmark file it comes from, and no other doc carries a date.
 */
import { codeSpansOf, isVariableTable, linesOf, tablesOf, type Doc, type Mismatch } from './markdown.js';

/** What a curl example that needs no token says, in a comment on its line or the line before. */
export const NO_TOKEN_MARKER = 'no token';

/** Kind 6: a curl example against `/api` or `/admin` with no Authorization header, and no marker saying why. */
export function curlsWithoutToken(doc: Doc): Mismatch[] {
  const texts = doc.text.split('\n');
  const said = (line: number) => [texts[line - 1], texts[line - 2]].some((text) => text !== undefined && /#.*/.exec(text)?.[0].toLowerCase().includes(NO_TOKEN_MARKER));
  const spans = codeSpansOf(doc);
  return spans.flatMap((span, index) => {
    if (!/(^|[\s$(])curl\s/.test(span.text)) return [];
    // A fenced command goes on over the lines that end with a backslash.
    let command = span.text;
    for (let next = index; span.fenced && /\\\s*$/.test(spans[next]!.text) && spans[next + 1]?.fenced; next++) command += ` ${spans[next + 1]!.text}`;
    const url = /\S*\/(api|admin)(\/|\?|\s|$|['"])\S*/.exec(command.replace(/#.*$/, ''))?.[0];
    if (url === undefined || /-H\s*['"]?authorization:|--header\s+['"]?authorization:|--oauth2-bearer/i.test(command) || said(span.line)) return [];
    return [{ file: doc.file, line: span.line, message: `curl ${url}: no Authorization header, and no "# ${NO_TOKEN_MARKER}: …" saying why` }];
  });
}

/** A figure of speed or scale: a ratio, a percentile, a time, a rate, a share, a count of rows, a comparison. */
const FIGURE = /×|\bp(50|90|95|99|999)\b|\d\s*(ms|µs|us)\b|\breq(uest)?s?\s*\/\s*s\b|requests (a|per) second|\d\s*%|\bmillion\b|\bthousand\b|\b\d+(\.\d+)?\s*[kKM]\b|\bfaster\b|\bslower\b/;
/** A link to a dated file of docs/benchmarks/. */
const DATED_LINK = /\]\((\.\/)?(docs\/)?benchmarks\/\d{4}-\d{2}-\d{2}\.md(#[^)]*)?\)/;

/** The sentences of the README's prose: outside code blocks and the configuration table, each with its first line. */
function sentencesOf(doc: Doc): { text: string; line: number }[] {
  const configurationRows = new Set(tablesOf(doc).filter(isVariableTable).flatMap((table) => [table.firstLine, table.firstLine + 1, ...table.rows.map((row) => row.line)]));
  const sentences: { text: string; line: number }[] = [];
  let current: { text: string; line: number } | undefined;
  for (const line of linesOf(doc)) {
    if (line.fenced || configurationRows.has(line.line) || line.text.trim() === '' || /^#/.test(line.text)) {
      if (current) sentences.push(current);
      current = undefined;
      continue;
    }
    // A sentence ends at a full stop (or ! ?) before a space and a capital, a bracket or code.
    const [first = '', ...others] = line.text.split(/(?<=[.!?])\s+(?=[A-Z[(`])/);
    if (current && /[.!?]$/.test(current.text) && /^[A-Z[(`]/.test(first)) {
      sentences.push(current);
      current = undefined;
    }
    if (current) current.text += ` ${first}`;
    else current = { text: first, line: line.line };
    for (const part of others) {
      sentences.push(current);
      current = { text: part, line: line.line };
    }
  }
  if (current) sentences.push(current);
  return sentences;
}

/** Kind 7, the README: a sentence with a figure of speed or scale that does not link the dated benchmark file it comes from. */
export function unsourcedClaims(readme: Doc): Mismatch[] {
  return sentencesOf(readme)
    .filter(({ text }) => FIGURE.test(text.replaceAll(/\]\([^)]*\)/g, ']').replaceAll(/`[^`]*`/g, '')) && !DATED_LINK.test(text))
    .map(({ text, line }) => ({ file: readme.file, line, message: `a figure of speed or scale with no link to a dated file of docs/benchmarks/: "${text.slice(0, 120)}"` }));
}

/** Kind 7, every doc: a date outside code blocks and links to docs/benchmarks/ (a date-time in an example is data). */
export function datesOutsideBenchmarks(doc: Doc): Mismatch[] {
  return linesOf(doc)
    .filter(({ fenced }) => !fenced)
    .flatMap(({ text, line }) => {
      const bare = text.replaceAll(/\[[^\]]*\]\([^)]*benchmarks\/[^)]*\)/g, '').replaceAll(/\]\([^)]*\)/g, ']').replaceAll(/benchmarks\/[\d-]+\.md/g, '');
      return [...bare.matchAll(/\b\d{4}-\d{2}-\d{2}(?!T)\b/g)].map(([date]) => ({ file: doc.file, line, message: `${date}: a dated figure belongs in docs/benchmarks/, linked from here` }));
    });
}
