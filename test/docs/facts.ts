/**
 * The repository's facts the docs check compares the docs with, read from the repository itself:
 * its files, its package.json scripts and what their commands accept, the variables its code reads,
 * its processes' configuration defaults. The only part of the check that reads files or runs anything.
 */
import { execFile as execFileCallback, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { ZodObject } from 'zod';
import { ROOT } from '../../tools/process.js';
import { npmCommandsOf, type Accepts, type ScriptFacts } from './commands.js';
import type { Doc } from './markdown.js';
import { parseArgsOptionsIn } from './parse-args.js';
import { constantsIn, variablesReadIn, type Defaults, type VariableFacts } from './variables.js';

const execFile = promisify(execFileCallback);
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

/** Every file of the repository: tracked, or new and not ignored. */
// Once each: a file with a merge conflict is listed once per side.
export const files = [...new Set(execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' }).split('\n'))].filter(
  (file) => file !== '' && existsSync(path.join(ROOT, file)),
);

/** Whether a path outside the repository's files is there all the same: one a run writes (git ignores it), or an installed package's. */
export function elsewhere(name: string): boolean {
  if (/^[\w@]/.test(name) && existsSync(path.join(ROOT, 'node_modules', name))) return true;
  try {
    execFileSync('git', ['check-ignore', '-q', name], { cwd: ROOT });
    return true;
  } catch {
    return false;
  }
}

/** The docs the check reads: README.md, CONTRIBUTING.md and docs/*.md (not the dated records in docs/benchmarks/). */
export const docs: Doc[] = ['README.md', 'CONTRIBUTING.md', ...files.filter((file) => /^docs\/[^/]+\.md$/.test(file)).sort()].map((file) => ({ file, text: read(file) }));

const packageJson = (folder: string) => JSON.parse(read(path.join(folder, 'package.json'))) as { scripts?: Record<string, string>; workspaces?: string[] };
const rootScripts = packageJson('.').scripts!;

/** The workspaces' folders: those of package.json's `workspaces` that hold a package.json. */
const workspaceFolders = packageJson('.').workspaces!.flatMap((pattern) => {
  const matches = pattern.includes('*') ? readdirSync(ROOT).filter((name) => new RegExp(`^${pattern.replace('*', '.*')}$`).test(name)) : [pattern];
  return matches.filter((name) => existsSync(path.join(ROOT, name, 'package.json')));
});

/** The options a program's `--help` lists, at the start of its lines: `-t, --testNamePattern`. */
async function helpOptions(args: string[]): Promise<Accepts> {
  const { stdout } = await execFile(process.execPath, args, { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });
  const options = [...stdout.matchAll(/^\s+(?:-(\w), )?--([\w.-]+)/gm)];
  return { kind: 'flags', long: options.map(([, , long]) => long!), short: options.flatMap(([, short]) => (short ? [short] : [])) };
}

/** What a node script's parseArgs call is given, read by running it with that call stubbed (print-parse-args.mjs). */
async function parseArgsOptions(script: string): Promise<Accepts> {
  const { stdout } = await execFile(process.execPath, ['--import', './test/docs/print-parse-args.mjs', script], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });
  const accepts = JSON.parse(stdout) as { strict: boolean; long: string[]; short: string[] };
  return accepts.strict ? { kind: 'flags', long: accepts.long, short: accepts.short } : { kind: 'anything' };
}

const JEST = ['node_modules/jest/bin/jest.js', '--help'];

/** What a root script's command accepts after `--`, by what runs it; undefined: nothing reads its flags. */
function acceptsOf(command: string): Promise<Accepts> | undefined {
  if (/\bjest(\.js)?\b/.test(command)) return helpOptions(JEST);
  if (/\bstryker run\b/.test(command)) return helpOptions(['node_modules/@stryker-mutator/core/bin/stryker.js', 'run', '--help']);
  const shellScript = /^(\S+\.sh)\b/.exec(command)?.[1];
  // A shell script that hands its arguments to jest takes jest's; any other, whatever it is given.
  if (shellScript) return /jest\.js[^\n]*"\$@"/.test(read(shellScript)) ? helpOptions(JEST) : Promise.resolve({ kind: 'anything' });
  const script = [...command.matchAll(/\bnode\s+(?:--\S+\s+)*([\w./-]+\.(?:ts|mjs|js))/g)].at(-1)?.[1];
  if (script === undefined) return undefined;
  const written = parseArgsOptionsIn(script, read(script));
  return written === 'computed' ? parseArgsOptions(script) : written && Promise.resolve(written);
}

/** The scripts, and what the commands of those the docs pass flags to accept. */
export async function scriptFacts(shownIn: Doc[]): Promise<ScriptFacts> {
  const withArgs = new Set(shownIn.flatMap((doc) => npmCommandsOf(doc).filter(({ args, script }) => args.length > 0 && script !== undefined).map(({ script }) => script!)));
  const accepts: Record<string, Accepts> = {};
  await Promise.all(
    [...withArgs].filter((script) => script in rootScripts).map(async (script) => {
      const found = await acceptsOf(rootScripts[script]!);
      if (found) accepts[script] = found;
    }),
  );
  const workspaces = Object.fromEntries(workspaceFolders.map((folder) => [folder, Object.keys(packageJson(folder).scripts ?? {})]));
  return { scripts: Object.keys(rootScripts), workspaces, accepts };
}

/** The code whose variables count: sources, shell scripts, Compose, Kubernetes and Dockerfiles, not the docs check itself. */
export const codeFiles = files.filter((file) => /\.(ts|js|mjs|cjs|sh|ya?ml)$|(^|\/)Dockerfile$|^\.ci\/run$/.test(file) && !file.endsWith('.d.ts') && !file.startsWith('test/docs/') && !file.startsWith('test/generated-client/'));

/** Each process's configuration schema, from its build: the gateway's, and each service's by its name. */
export interface Schemas {
  gateway: ZodObject;
  services: Record<string, ZodObject>;
}

export async function configSchemas(): Promise<Schemas> {
  const { configSchema } = (await import('../../gateway/dist/config.js')) as { configSchema: ZodObject };
  const { readServiceList } = await import('../../shared/dist/platform/services.js');
  const services: Schemas['services'] = {};
  // One import at a time: jest's module loader can fail imports made concurrently.
  for (const { name, workspace } of readServiceList()) services[name] = ((await import(`../../${workspace}/dist/config.js`)) as { configSchema: ZodObject }).configSchema;
  return { gateway: configSchema, services };
}

/** What the code reads: each code file's variables (a schema's, for the file declaring it), and its constants. */
export function variableFacts(schemas: Schemas): VariableFacts {
  const texts = codeFiles.map((file) => [file, read(file)] as const);
  const reads = Object.fromEntries(texts.map(([file, text]) => [file, variablesReadIn(file, text)]));
  reads['gateway/src/config.ts']!.push(...Object.keys(schemas.gateway.shape));
  reads['shared/src/service.ts']!.push(...Object.values(schemas.services).flatMap((schema) => Object.keys(schema.shape)));
  return { reads, constants: [...new Set(texts.flatMap(([, text]) => constantsIn(text)))] };
}

/** Each process's configuration parsed from an empty environment. */
export const configDefaults = (schemas: Schemas): Defaults => ({
  gateway: schemas.gateway.parse({}) as Record<string, unknown>,
  services: Object.fromEntries(Object.entries(schemas.services).map(([name, schema]) => [name, schema.parse({}) as Record<string, unknown>])),
});

/**
 * The sources kind 9 reads: those that run programs (they import child_process), and those that
 * import one of them, which may call its wrappers.
 */
export function programSources(): { file: string; text: string }[] {
  const sources = codeFiles.filter((file) => /\.(ts|js|mjs)$/.test(file)).map((file) => ({ file, text: read(file) }));
  const wanted = new Set(sources.filter(({ text }) => /['"](node:)?child_process['"]/.test(text)).map(({ file }) => file));
  const importsWanted = ({ file, text }: { file: string; text: string }) =>
    [...text.matchAll(/from\s+'(\.[^']+)'/g)].some(([, specifier]) => {
      const resolved = path.posix.join(path.posix.dirname(file), specifier!);
      return wanted.has(resolved) || wanted.has(resolved.replace(/\.js$/, '.ts'));
    });
  for (let size = 0; size !== wanted.size; ) {
    size = wanted.size;
    for (const source of sources) if (!wanted.has(source.file) && importsWanted(source)) wanted.add(source.file);
  }
  return sources.filter(({ file }) => wanted.has(file));
}

/** The programs the project's npm dependencies bring (node_modules/.bin). */
export const dependencyBins = readdirSync(path.join(ROOT, 'node_modules', '.bin'));
