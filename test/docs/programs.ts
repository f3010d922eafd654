/**
 * Kind 9 of the docs check: every program the project's code runs by name is declared, in
 * scripts/setup/needs.ts or in the short list of programs every machine the project runs on has;
 * and docs/testing.md names every need. The code is read with TypeScript's parser: a call of
 * child_process (spawn, execFile, exec and their Sync forms) names its program, or a function
 * that passes its parameter on to one (a wrapper, as tools/process.ts's `run`) does.
 */
import path from 'node:path';
import ts from 'typescript';
import type { Doc, Mismatch } from './markdown.js';

/** A code file: its path from the repository root and its text. */
export interface Source {
  file: string;
  text: string;
}

/** A program run by name, where. */
export interface ProgramRun {
  program: string;
  file: string;
  line: number;
}

const CHILD_PROCESS = new Set(['spawn', 'spawnSync', 'execFile', 'execFileSync', 'exec', 'execSync']);
/** These take a shell command line: its first word is the program. */
const SHELL = new Set(['exec', 'execSync']);

type FunctionLike = ts.FunctionDeclaration | ts.ArrowFunction | ts.FunctionExpression;

interface Parsed {
  file: string;
  source: ts.SourceFile;
  /** Local names of child_process functions (by their own name), and of the module itself. */
  childProcess: Map<string, string>;
  namespaces: Set<string>;
  /** Imported names: local → the imported module's file and the name it exports. */
  imports: Map<string, { file: string; name: string }>;
  /** Named functions: declarations and `const f = (…) => …`. */
  functions: Map<string, FunctionLike>;
  calls: ts.CallExpression[];
}

function parse({ file, text }: Source, files: Set<string>): Parsed {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const parsed: Parsed = { file, source, childProcess: new Map(), namespaces: new Set(), imports: new Map(), functions: new Map(), calls: [] };
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) addImport(parsed, node, node.moduleSpecifier.text, files);
    if (ts.isFunctionDeclaration(node) && node.name) parsed.functions.set(node.name.text, node);
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer) {
      if (ts.isArrowFunction(node.initializer) || ts.isFunctionExpression(node.initializer)) parsed.functions.set(node.name.text, node.initializer);
      // `const run = promisify(execFile)` is execFile.
      const [argument] = ts.isCallExpression(node.initializer) && node.initializer.expression.getText() === 'promisify' ? node.initializer.arguments : [];
      if (argument && ts.isIdentifier(argument) && parsed.childProcess.has(argument.text)) parsed.childProcess.set(node.name.text, parsed.childProcess.get(argument.text)!);
    }
    if (ts.isCallExpression(node)) parsed.calls.push(node);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return parsed;
}

function addImport(parsed: Parsed, node: ts.ImportDeclaration, specifier: string, files: Set<string>): void {
  const clause = node.importClause;
  if (!clause) return;
  if (specifier === 'node:child_process' || specifier === 'child_process') {
    if (clause.name) parsed.namespaces.add(clause.name.text);
    const bindings = clause.namedBindings;
    if (bindings && ts.isNamespaceImport(bindings)) parsed.namespaces.add(bindings.name.text);
    if (bindings && ts.isNamedImports(bindings)) for (const one of bindings.elements) parsed.childProcess.set(one.name.text, (one.propertyName ?? one.name).text);
    return;
  }
  if (!specifier.startsWith('.') || !clause.namedBindings || !ts.isNamedImports(clause.namedBindings)) return;
  const resolved = path.posix.join(path.posix.dirname(parsed.file), specifier);
  const file = [resolved, resolved.replace(/\.js$/, '.ts')].find((candidate) => files.has(candidate));
  if (file) for (const one of clause.namedBindings.elements) parsed.imports.set(one.name.text, { file, name: (one.propertyName ?? one.name).text });
}

/** Where a call's program is: the argument's index, and whether it is a shell command line. */
interface Runner {
  index: number;
  shell: boolean;
}

/** What a program expression can be: the names written in it, and the parameters of its function it comes from. */
interface Flow {
  names: string[];
  params: { fn: FunctionLike; index: number }[];
}

const NONE: Flow = { names: [], params: [] };
const both = (a: Flow, b: Flow): Flow => ({ names: [...a.names, ...b.names], params: [...a.params, ...b.params] });

/** The functions whose program argument is known: child_process's, and the wrappers found so far (by file#name). */
class Programs {
  readonly wrappers = new Map<string, number>();
  readonly byFile: Map<string, Parsed>;

  constructor(parsed: Parsed[]) {
    this.byFile = new Map(parsed.map((one) => [one.file, one]));
  }

  /** The declaration a called name stands for, here or in the module it is imported from. */
  declaration(parsed: Parsed, name: string): { parsed: Parsed; name: string; fn?: FunctionLike } | undefined {
    const imported = parsed.imports.get(name);
    const home = imported ? this.byFile.get(imported.file) : parsed;
    const own = imported ? imported.name : name;
    return home ? { parsed: home, name: own, fn: home.functions.get(own) } : undefined;
  }

  runnerOf(parsed: Parsed, call: ts.CallExpression): Runner | undefined {
    const callee = call.expression;
    if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) && parsed.namespaces.has(callee.expression.text) && CHILD_PROCESS.has(callee.name.text)) {
      return { index: 0, shell: SHELL.has(callee.name.text) };
    }
    if (!ts.isIdentifier(callee)) return undefined;
    const own = parsed.childProcess.get(callee.text);
    if (own !== undefined) return CHILD_PROCESS.has(own) ? { index: 0, shell: SHELL.has(own) } : undefined;
    const declared = this.declaration(parsed, callee.text);
    const index = declared && this.wrappers.get(`${declared.parsed.file}#${declared.name}`);
    return index === undefined ? undefined : { index, shell: false };
  }

  /** What `expression`, in `parsed`, can be, `depth` steps into the functions it calls. */
  flow(parsed: Parsed, expression: ts.Expression | undefined, depth = 0): Flow {
    if (expression === undefined || depth > 4) return NONE;
    if (ts.isStringLiteralLike(expression)) return { names: [expression.text], params: [] };
    if (ts.isTemplateExpression(expression)) return { names: [expression.head.text], params: [] };
    if (ts.isParenthesizedExpression(expression) || ts.isAsExpression(expression)) return this.flow(parsed, expression.expression, depth);
    if (ts.isConditionalExpression(expression)) return both(this.flow(parsed, expression.whenTrue, depth), this.flow(parsed, expression.whenFalse, depth));
    if (ts.isBinaryExpression(expression) && [ts.SyntaxKind.QuestionQuestionToken, ts.SyntaxKind.BarBarToken].includes(expression.operatorToken.kind)) {
      return both(this.flow(parsed, expression.left, depth), this.flow(parsed, expression.right, depth));
    }
    if (expression.getText() === 'process.execPath') return { names: ['node'], params: [] };
    if (ts.isIdentifier(expression)) return this.flowOfName(parsed, expression, depth);
    if (ts.isCallExpression(expression)) return this.flowOfCall(parsed, expression, undefined, depth);
    return NONE;
  }

  /** A name: a parameter of the function it is in, or a variable, through what it was set to. */
  private flowOfName(parsed: Parsed, name: ts.Identifier, depth: number): Flow {
    for (let node: ts.Node | undefined = name.parent; node; node = node.parent) {
      if (!ts.isFunctionDeclaration(node) && !ts.isArrowFunction(node) && !ts.isFunctionExpression(node)) continue;
      const index = node.parameters.findIndex((parameter) => ts.isIdentifier(parameter.name) && parameter.name.text === name.text);
      if (index >= 0) return { names: [], params: [{ fn: node, index }] };
    }
    let found: Flow = NONE;
    const visit = (node: ts.Node) => {
      if (ts.isVariableDeclaration(node) && node.initializer) {
        if (ts.isIdentifier(node.name) && node.name.text === name.text) found = this.flow(parsed, node.initializer, depth + 1);
        const element = ts.isArrayBindingPattern(node.name) ? node.name.elements.findIndex((one) => ts.isBindingElement(one) && ts.isIdentifier(one.name) && one.name.text === name.text) : -1;
        if (element >= 0 && ts.isCallExpression(node.initializer)) found = this.flowOfCall(parsed, node.initializer, element, depth + 1);
      }
      ts.forEachChild(node, visit);
    };
    visit(parsed.source);
    return found;
  }

  /** A call: `path.join(…, 'tsc')` is its last part; a function of ours, what it returns (or that element of it). */
  private flowOfCall(parsed: Parsed, call: ts.CallExpression, element: number | undefined, depth: number): Flow {
    const callee = call.expression.getText();
    if (/^(path\.)?(join|resolve)$/.test(callee)) return { names: this.flow(parsed, call.arguments.at(-1), depth).names.map((name) => path.basename(name)), params: [] };
    const declared = ts.isIdentifier(call.expression) ? this.declaration(parsed, call.expression.text) : undefined;
    if (!declared?.fn) return NONE;
    const inner = returnsOf(declared.fn)
      .flatMap((returned) => (element === undefined ? [returned] : elementsOf(returned, element)))
      .reduce((flow, returned) => both(flow, this.flow(declared.parsed, returned, depth + 1)), NONE);
    // The callee's parameters it returns are the caller's arguments.
    const start: Flow = { names: inner.names, params: [] };
    return inner.params.filter(({ fn }) => fn === declared.fn).reduce((flow, { index }) => both(flow, this.flow(parsed, call.arguments[index], depth + 1)), start);
  }
}

function returnsOf(fn: FunctionLike): ts.Expression[] {
  if (fn.body && !ts.isBlock(fn.body)) return [fn.body];
  const found: ts.Expression[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isReturnStatement(node) && node.expression) found.push(node.expression);
    if (!ts.isFunctionLike(node)) ts.forEachChild(node, visit);
  };
  if (fn.body) ts.forEachChild(fn.body, visit);
  return found;
}

/** Element `index` of what an expression returns: of an array literal, of each branch of a condition. */
function elementsOf(expression: ts.Expression, index: number): ts.Expression[] {
  if (ts.isConditionalExpression(expression)) return [...elementsOf(expression.whenTrue, index), ...elementsOf(expression.whenFalse, index)];
  if (ts.isArrayLiteralExpression(expression) && expression.elements[index]) return [expression.elements[index]!];
  return [];
}

/** The name of the function `fn` is: a declaration's, or the variable's it is assigned to. */
const nameOf = (fn: FunctionLike) => (ts.isFunctionDeclaration(fn) ? fn.name?.text : ts.isVariableDeclaration(fn.parent) && ts.isIdentifier(fn.parent.name) ? fn.parent.name.text : undefined);

/** Every program the sources run by name, and where. */
export function programsRun(sources: Source[]): ProgramRun[] {
  const files = new Set(sources.map(({ file }) => file));
  const programs = new Programs(sources.map((source) => parse(source, files)));
  const runs = () => [...programs.byFile.values()].flatMap((parsed) => parsed.calls.flatMap((call) => {
    const runner = programs.runnerOf(parsed, call);
    return runner ? [{ parsed, call, runner, flow: programs.flow(parsed, call.arguments[runner.index]) }] : [];
  }));
  // A function that hands its parameter to a runner as the program is a runner too: until none is new.
  for (let found = true; found; ) {
    found = false;
    for (const { parsed, flow } of runs()) {
      for (const { fn, index } of flow.params) {
        const name = nameOf(fn);
        const key = `${parsed.file}#${name}`;
        if (name === undefined || programs.wrappers.has(key)) continue;
        programs.wrappers.set(key, index);
        found = true;
      }
    }
  }
  return runs().flatMap(({ parsed, call, runner, flow }) =>
    flow.names
      .map((name) => (runner.shell ? name.trim().split(/\s+/)[0]! : path.basename(name)))
      .filter((program) => program !== '')
      .map((program) => ({ program, file: parsed.file, line: parsed.source.getLineAndCharacterOfPosition(call.getStart()).line + 1 })),
  );
}

/** A need of scripts/setup/needs.ts, as far as this check reads it. */
export interface NeedFacts {
  name: string;
  for: string[];
  programs: string[][];
}

/** Programs the code may run without a need: every machine the project runs on has them. */
export const EVERY_MACHINE: Record<string, string> = {
  node: 'the project\'s runtime, which npm ci installs (the node devDependency)',
  npm: 'comes with Node',
  sh: 'the POSIX shell',
  bash: 'the shell of every supported system (Linux, macOS)',
  tar: 'POSIX; the deploy tests unpack an old commit with it',
  ps: 'POSIX; the process tests read the process table with it',
  taskset: 'util-linux, on every Linux machine; the bench pins with it only where it finds it',
  pidof: 'procps, on every Linux machine; npm run load, which reads /proc, runs on Linux only',
  'apt-get': 'the bench installs the bench\'s need with it where it is missing, on Debian only',
};

/** Kind 9: a program run by name that no need provides, no machine is sure to have, and no dependency of ours brings. */
export function undeclaredPrograms(runs: ProgramRun[], needs: NeedFacts[], dependencyBins: string[]): Mismatch[] {
  const declared = new Set([...needs.flatMap((need) => need.programs.flat()), ...Object.keys(EVERY_MACHINE), ...dependencyBins]);
  return runs.filter(({ program }) => !declared.has(program)).map(({ program, file, line }) => ({ file, line, message: `runs ${program}, which no need in scripts/setup/needs.ts provides` }));
}

/** The words of a doc as a reader sees them: no markdown, one space between words, lower case. */
const plain = (text: string) => text.replaceAll(/[`*_]/g, '').replaceAll(/\s+/g, ' ').toLowerCase();

/** Kind 9, the docs: a need docs/testing.md does not name (one only the bench has, docs/performance.md). */
export function needsNotNamed(needs: NeedFacts[], docs: Doc[]): Mismatch[] {
  return needs.flatMap((need) => {
    const file = need.for.every((purpose) => purpose === 'bench') ? 'docs/performance.md' : 'docs/testing.md';
    const doc = docs.find((one) => one.file === file);
    return doc && plain(doc.text).includes(plain(need.name)) ? [] : [{ file, line: 0, message: `does not name the need "${need.name}" (scripts/setup/needs.ts)` }];
  });
}
