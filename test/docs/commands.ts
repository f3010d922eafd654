/**
 * Kinds 1 and 2 of the docs check: every npm command the docs show names a script that exists,
 * and every flag shown for it is one the command accepts.
 */
import { codeSpansOf, type CodeSpan, type Doc, type Mismatch } from './markdown.js';

/** What a script's command accepts after `--`. */
export type Accepts =
  /** Its own parser (node:util parseArgs, jest's or Stryker's options): these long and short flags. */
  | { kind: 'flags'; long: string[]; short: string[] }
  /** Whatever it is given (a shell script passing its arguments on). */
  | { kind: 'anything' };

/** The repository's facts these checks compare with. */
export interface ScriptFacts {
  /** The root package.json's scripts. */
  scripts: string[];
  /** Each workspace's scripts, by its folder (`users-service`). */
  workspaces: Record<string, string[]>;
  /** What each root script accepts after `--`; a script not here reads no flags. */
  accepts: Record<string, Accepts>;
}

/** An npm command as a doc shows it. */
export interface NpmCommand {
  line: number;
  /** `run`, `start`, `test`, `ci`, `install`, …: npm's own command. */
  verb: string;
  script?: string;
  /** The workspace `-w` names ('' when `-w` has no value in the text). */
  workspace?: string;
  /** What follows `--`, for the script. */
  args: string[];
}

/** npm commands that are npm's own, not a script of the package. */
const NPM_BUILTINS = new Set(['ci', 'install', 'i', 'exec', 'init', 'ls', 'view', 'pack', 'publish', 'audit', 'outdated', 'update']);

/** Shell words: quoted strings stay one word. */
const wordsOf = (text: string) => [...text.matchAll(/'[^']*'|"[^"]*"|\S+/g)].map(([word]) => word);

/** Where a command ends: a shell operator, a comment, or the end of a command substitution or list. */
const ENDS = new Set(['&&', '||', ';', '|', '\\']);

/** The npm commands in one code span; a span that starts with `-- ` continues `previous`. */
function commandsIn(span: CodeSpan, previous: NpmCommand | undefined): NpmCommand[] {
  const commands: NpmCommand[] = [];
  if (span.text.startsWith('-- ') && previous) commands.push({ ...previous, line: span.line, args: argsFrom(wordsOf(span.text), 1) });
  // Each `npm` starts a command, in a command substitution or a quoted string too.
  for (const match of span.text.matchAll(/(?<![\w./-])npm(?=\s)/g)) {
    const command = parseNpm(wordsOf(span.text.slice(match.index + 3)), span.line);
    if (command) commands.push(command);
  }
  return commands;
}

/** The words up to the end of the command, usage brackets and what closes a substitution dropped. */
function argsFrom(words: string[], start = 0): string[] {
  const args: string[] = [];
  for (const whole of words.slice(start)) {
    if (ENDS.has(whole) || whole.startsWith('#')) break;
    // A backtick ends inline code that a fenced block (a file layout) quotes.
    const word = whole.split('`')[0]!;
    const bare = word.replaceAll(/^\[+|\]+$/g, '').replace(/[)"',;:]+$/, '');
    if (bare !== '' && bare !== '…') args.push(bare);
    if (word !== whole || /[),;:]["']?$/.test(word)) break;
  }
  return args;
}

function parseNpm(words: string[], line: number): NpmCommand | undefined {
  const rest = argsFrom(words);
  const verb = rest.shift();
  if (verb === undefined || verb.startsWith('-')) return undefined;
  const command: NpmCommand = { line, verb, args: [] };
  if (verb === 'start' || verb === 'test') command.script = verb;
  for (let i = 0; i < rest.length; i++) {
    const word = rest[i]!;
    if (word === '--') {
      command.args = rest.slice(i + 1);
      break;
    }
    if (word === '-w' || word === '--workspace') command.workspace = rest[++i] ?? '';
    else if (word.startsWith('--workspace=')) command.workspace = word.slice('--workspace='.length);
    else if (!word.startsWith('-') && command.script === undefined && (verb === 'run' || verb === 'run-script')) command.script = word;
  }
  return command;
}

/** Every npm command the docs' code shows. */
export function npmCommandsOf(doc: Doc): NpmCommand[] {
  const commands: NpmCommand[] = [];
  let previous: { section: string; command: NpmCommand } | undefined;
  for (const span of codeSpansOf(doc)) {
    const found = commandsIn(span, previous?.section === span.section ? previous.command : undefined);
    commands.push(...found);
    if (found.length > 0) previous = { section: span.section, command: found.at(-1)! };
  }
  return commands;
}

/** The workspaces a `-w` value may mean: itself, or every one its `<placeholder>` matches. */
function workspacesMeant(workspace: string, facts: ScriptFacts): string[] {
  const all = Object.keys(facts.workspaces);
  if (workspace === '') return all;
  if (!workspace.includes('<')) return [workspace];
  const pattern = new RegExp(`^${workspace.split(/<[^>]*>/).map((part) => part.replaceAll(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\w-]+')}$`);
  return all.filter((name) => pattern.test(name));
}

/** Kind 1: an npm command names a script its package (or the workspace named) does not have. */
export function missingScripts(docs: Doc[], facts: ScriptFacts): Mismatch[] {
  return docs.flatMap((doc) =>
    npmCommandsOf(doc).flatMap(({ line, verb, script, workspace }): Mismatch[] => {
      if (NPM_BUILTINS.has(verb)) return [];
      if (script === undefined) return [{ file: doc.file, line, message: `npm ${verb}: not a script npm runs` }];
      if (workspace === undefined) return facts.scripts.includes(script) ? [] : [{ file: doc.file, line, message: `npm run ${script}: no such script in package.json` }];
      const meant = workspacesMeant(workspace, facts);
      const lacking = meant.filter((name) => !facts.workspaces[name]?.includes(script));
      // `-w` without a name (prose about the option) needs one workspace with the script; a name or pattern, each it means.
      const wrong = meant.length === 0 || (workspace === '' ? lacking.length === meant.length : lacking.length > 0);
      return wrong ? [{ file: doc.file, line, message: `npm run ${script} -w ${workspace}: no such script in ${lacking.join(', ') || 'any workspace'}` }] : [];
    }),
  );
}

/** The flags among a command's arguments: `--name`, `--name=value`, `-abc` (three short ones). */
function flagsOf(args: string[]): { flag: string; long: boolean }[] {
  return args.flatMap((arg): { flag: string; long: boolean }[] => {
    if (/^--[A-Za-z]/.test(arg)) return [{ flag: arg.slice(2).split('=')[0]!, long: true }];
    if (/^-[A-Za-z]+$/.test(arg)) return [...arg.slice(1)].map((flag) => ({ flag, long: false }));
    return [];
  });
}

/** Kind 2: a flag shown for a root script that the script's command does not accept. */
export function rejectedFlags(docs: Doc[], facts: ScriptFacts): Mismatch[] {
  return docs.flatMap((doc) =>
    npmCommandsOf(doc).flatMap(({ line, script, workspace, args }) => {
      if (script === undefined || workspace !== undefined || !facts.scripts.includes(script)) return [];
      const accepts = facts.accepts[script] ?? { kind: 'flags', long: [], short: [] };
      if (accepts.kind === 'anything') return [];
      return flagsOf(args)
        .filter(({ flag, long }) => !(long ? accepts.long : accepts.short).includes(flag))
        .map(({ flag, long }) => ({ file: doc.file, line, message: `npm run ${script} -- ${long ? '--' : '-'}${flag}: not an option of the command` }));
    }),
  );
}
