/**
 * Kinds 3 and 4 of the docs check: every environment variable the docs name is one the code reads,
 * every one the code reads is named where its readers look for it, and the README's configuration
 * table states the defaults the code has.
 */
import { codeSpansOf, isVariableTable, namesIn, tablesOf, type Doc, type Mismatch } from './markdown.js';

const NAME = String.raw`[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+`;
const ANY_NAME = String.raw`[A-Z][A-Z0-9_]*`;

/** Upper-case names in docs that are not environment variables: the kernel's and MySQL's words. */
const NOT_VARIABLES: Record<string, string> = {
  CAP_SYS_RESOURCE: 'a Linux capability',
  SO_REUSEPORT: 'a socket option',
  TIME_WAIT: 'a TCP state',
  COM_STMT_EXECUTE: 'a command of the MySQL protocol',
  MARIADB_CLIENT_CACHE_METADATA: 'a capability of the MariaDB protocol',
};

/** Variables the docs may name though no code of ours reads them: what our dependencies read. */
const READ_BY_DEPENDENCIES: [RegExp, string][] = [
  [/^OTEL_/, 'the OpenTelemetry SDK reads its own variables (docs/tracing.md)'],
  [/^TESTCONTAINERS_/, 'testcontainers reads them; scripts/test-containers.sh sets them'],
];

/** Variables code reads that no doc need name: the system's, and those a process sets for its own children. */
const NOT_SETTINGS: Record<string, string> = {
  PATH: 'the system\'s search path, passed on to children',
  HOME: 'the user\'s home, passed on to children',
  TEST_REDIS_KEY_PREFIX: 'the global setup gives each run its prefix',
  TEST_REDIS_CLUSTER_DIR: 'the global setup tells the chaos run where its cluster lives',
  TEST_REDIS_TARGET: 'set by the cluster suites for the processes they start',
  TEST_HEADLESS_DNS: 'set by test/support/replica-stack.ts for the gateway it starts with the headless-dns.mjs preload',
  UPSTREAM_URL: 'the bench tells its proxy servers where the service is',
  RESPONSE: 'the bench gives its ceiling server the bytes to answer',
  SDK: 'the bench tells its OpenTelemetry floor server whether to load the SDK',
};

/** The variables a code file reads, from its text: TypeScript, JavaScript, shell, Compose or a Dockerfile. */
export function variablesReadIn(file: string, text: string): string[] {
  const names = new Set<string>();
  const add = (pattern: RegExp) => {
    for (const match of text.matchAll(pattern)) names.add(match[1]!);
  };
  if (/\.(ts|js|mjs|cjs)$/.test(file)) {
    add(new RegExp(String.raw`\b(?:process\.env|env|environment)\??\.(${ANY_NAME})\b`, 'g'));
    add(new RegExp(String.raw`\b(?:process\.env|env|environment)\[\s*['"\`](${ANY_NAME})['"\`]\s*\]`, 'g'));
    // A helper given the name: countFromEnv('LOAD_STEPS', …), count('ATTACK_CONNECTIONS', …).
    add(new RegExp(String.raw`\b\w*(?:[Ee]nv|[Cc]ount)\w*\(\s*['"](${NAME})['"]`, 'g'));
    for (const [, list] of text.matchAll(/\{([^{}]*)\}\s*=\s*process\.env\b/g)) for (const [name] of list!.matchAll(new RegExp(`^\\s*${ANY_NAME}`, 'gm'))) names.add(name.trim());
  } else if (/(^|\/)Dockerfile$/.test(file)) {
    add(new RegExp(String.raw`^ARG\s+(${ANY_NAME})`, 'gm'));
    add(new RegExp(String.raw`\$\{?(${ANY_NAME})`, 'g'));
  } else if (/\.ya?ml$/.test(file)) {
    add(new RegExp(String.raw`\$[{(](${ANY_NAME})`, 'g'));
  } else {
    // A shell script reads a variable it never sets, or one it gives a default (`${DEBUG:-testcontainers}`).
    const assigned = new Set([...text.matchAll(new RegExp(String.raw`(?:^|[\s;(])(?:export\s+|local\s+|readonly\s+)?(${ANY_NAME})=|\bfor\s+(${ANY_NAME})\s+in\b`, 'gm'))].map((m) => m[1] ?? m[2]));
    for (const [, name] of text.matchAll(new RegExp(String.raw`\$\{?(${ANY_NAME})(?!\w)`, 'g'))) if (!assigned.has(name)) names.add(name!);
    add(new RegExp(String.raw`\$\{(${ANY_NAME}):?[-+=?]`, 'g'));
  }
  return [...names];
}

/** Upper-case constants a code file declares (`const WINDOW_SECONDS = 60`): a doc naming one names the constant. */
export const constantsIn = (text: string) => [...text.matchAll(new RegExp(String.raw`\b(?:const|let|readonly|static)\s+(${NAME})\b`, 'g'))].map(([, name]) => name!);

/** The environment variables a doc names: in its code, its configuration tables, and `NAME=value` before a command. */
export function variablesNamedIn(doc: Doc): { name: string; line: number }[] {
  const found: { name: string; line: number }[] = [];
  for (const span of codeSpansOf(doc)) {
    // A shell's own variables (`TOKEN=$(…)` on a line of its own) are not the environment's.
    const text = span.text.replaceAll(/\$\([^)]*\)/g, '');
    for (const [name] of text.matchAll(new RegExp(`(?<![\\w$.{-])${NAME}\\b`, 'g'))) found.push({ name, line: span.line });
    // `NAME=value` before a command, or alone in inline code.
    const assignments = (span.fenced ? /^\s*((?:[A-Z][A-Z0-9_]*=\S*\s+)+)[^\s#]/ : /^((?:[A-Z][A-Z0-9_]*=\S*(?:\s+|$))+)/).exec(text)?.[1] ?? '';
    for (const [, name] of assignments.matchAll(new RegExp(`(${ANY_NAME})=`, 'g'))) found.push({ name: name!, line: span.line });
  }
  for (const table of tablesOf(doc).filter(isVariableTable)) {
    for (const row of table.rows) for (const name of namesIn(row.cells[0] ?? '')) found.push({ name, line: row.line });
  }
  const once = new Map(found.map((one) => [`${one.name}:${one.line}`, one]));
  return [...once.values()].filter(({ name }) => !(name in NOT_VARIABLES));
}

/** What the code reads: each code file's variables, and the constants it declares. */
export interface VariableFacts {
  reads: Record<string, string[]>;
  constants: string[];
}

const readers = (facts: VariableFacts, name: string) => Object.keys(facts.reads).filter((file) => facts.reads[file]!.includes(name));

/** Kind 3, one way: a variable a doc names that no code reads (nor a dependency of ours). */
export function unreadVariables(docs: Doc[], facts: VariableFacts): Mismatch[] {
  return docs.flatMap((doc) =>
    variablesNamedIn(doc)
      .filter(({ name }) => !/_\*?$/.test(name) && !facts.constants.includes(name) && !READ_BY_DEPENDENCIES.some(([pattern]) => pattern.test(name)))
      .filter(({ name }) => readers(facts, name).length === 0)
      .map(({ name, line }) => ({ file: doc.file, line, message: `${name}: no code reads this variable` })),
  );
}

/** Where a variable's readers look it up, by the code that reads it: the most public place wins. */
const PLACES: { code: RegExp; docs: string[]; where: string }[] = [
  { code: /^(gateway|shared|[\w-]+-service)\/src\//, docs: [], where: 'the README\'s configuration table' },
  { code: /^(docker-compose\.yml|compose\/|k8s\/|([\w-]+\/)?Dockerfile$)/, docs: ['docs/deploy.md'], where: 'docs/deploy.md' },
  // The bench's settings are with its methods; the tracing bench's with tracing's cost.
  { code: /^bench\//, docs: ['docs/performance.md', 'docs/tracing.md', 'docs/testing.md'], where: 'docs/performance.md, docs/tracing.md or docs/testing.md' },
  { code: /./, docs: ['docs/testing.md'], where: 'docs/testing.md' },
];

/** The names of the README's configuration table; `OTEL_*` names every variable starting so. */
function configurationTableNames(docs: Doc[]): string[] {
  const readme = docs.find((doc) => doc.file === 'README.md');
  return readme ? tablesOf(readme).filter(isVariableTable).flatMap((table) => table.rows.flatMap((row) => namesIn(row.cells[0] ?? ''))) : [];
}

const covers = (names: string[], name: string) => names.some((named) => named === name || (named.endsWith('_*') && name.startsWith(named.slice(0, -1))));

/** Kind 3, the other way: a variable the code reads that the doc for its place does not name. */
export function undocumentedVariables(docs: Doc[], facts: VariableFacts): Mismatch[] {
  // Named: written in the doc's code, as a word of its own (`--build-arg WORKSPACE=…` names WORKSPACE).
  const namedIn = (file: string, name: string) => {
    const doc = docs.find((one) => one.file === file);
    return doc !== undefined && codeSpansOf(doc).some(({ text }) => new RegExp(`(?<![\\w-])${name}(?![\\w-])`).test(text));
  };
  const all = [...new Set(Object.values(facts.reads).flat())].filter((name) => !(name in NOT_SETTINGS)).sort();
  return all.flatMap((name) => {
    const files = readers(facts, name);
    const place = PLACES.find(({ code }) => files.some((file) => code.test(file)))!;
    const named = place.docs.length === 0 ? covers(configurationTableNames(docs), name) : place.docs.some((doc) => namedIn(doc, name));
    return named ? [] : [{ file: place.docs[0] ?? 'README.md', line: 0, message: `${name}: read by ${files.join(', ')}, not named in ${place.where}` }];
  });
}

/** The defaults each process's configuration has: what it parses an empty environment to. */
export interface Defaults {
  gateway: Record<string, unknown>;
  /** By service name (`users`). */
  services: Record<string, Record<string, unknown>>;
}

/** The plain defaults a row states: backticked literals, or empty/none/unset, before the explanation. */
function statedDefaults(cell: string): (string | undefined)[] | undefined {
  const items: (string | undefined)[] = [];
  let rest = cell;
  for (;;) {
    const literal = /^`([^`]*)`/.exec(rest) ?? /^(empty|none|unset)\b/.exec(rest);
    if (!literal) return undefined;
    items.push(literal[0].startsWith('`') ? literal[1] : undefined);
    rest = rest.slice(literal[0].length);
    if (!rest.startsWith(', ')) return items;
    rest = rest.slice(2);
  }
}

const shown = (value: unknown) => (value === undefined || value === '' || (Array.isArray(value) && value.length === 0) ? undefined : Array.isArray(value) ? value.join(',') : String(value));

/** Kind 4: a default the README's configuration table states that is not the code's. */
export function wrongDefaults(readme: Doc, defaults: Defaults): Mismatch[] {
  return tablesOf(readme)
    .filter(isVariableTable)
    .flatMap((table) => table.rows)
    .flatMap(({ line, cells: [variables = '', who = '', stated = ''] }) => {
      const names = namesIn(variables).filter((name) => !name.endsWith('*'));
      const items = statedDefaults(stated);
      if (!items) return [];
      if (items.length !== names.length && items.length !== 1) return [{ file: readme.file, line, message: `${names.join(', ')}: ${items.length} defaults for ${names.length} variables` }];
      const processes = Object.entries({ ...(who === 'services' ? {} : { gateway: defaults.gateway }), ...(who === 'gateway' ? {} : defaults.services) });
      return names.flatMap((name, index) => {
        const item = items.length === 1 ? items[0] : items[index];
        return processes
          .filter(([process, config]) => name in config && shown(config[name]) !== item?.replaceAll('<name>', process))
          .map(([process, config]) => ({ file: readme.file, line, message: `${name}: the table says ${item ?? 'none'}, ${process}'s default is ${shown(config[name]) ?? 'none'}` }));
      });
    });
}
