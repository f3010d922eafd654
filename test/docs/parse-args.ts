/**
 * The options a script's node:util parseArgs call accepts, read from the script's source: the
 * `options` object written in the call, or the variable holding it. A script whose options are
 * built as it runs (scripts/seed.ts: one per service) is asked instead (print-parse-args.mjs).
 */
import ts from 'typescript';
import type { Accepts } from './commands.js';

/** What an object literal's property is named, and its own properties by name. */
const keyOf = (property: ts.ObjectLiteralElementLike) => (property.name && (ts.isIdentifier(property.name) || ts.isStringLiteral(property.name)) ? property.name.text : undefined);

function objectOf(expression: ts.Expression | undefined, source: ts.SourceFile): ts.ObjectLiteralExpression | undefined {
  while (expression && (ts.isAsExpression(expression) || ts.isSatisfiesExpression(expression) || ts.isParenthesizedExpression(expression))) expression = expression.expression;
  if (expression && ts.isObjectLiteralExpression(expression)) return expression;
  if (!expression || !ts.isIdentifier(expression)) return undefined;
  // A variable given more properties later (`options[name] = …`) is built as the script runs.
  if (new RegExp(String.raw`\b${expression.text}(\[[^\]]*\]|\.\w+)\s*=[^=]`).test(source.text)) return undefined;
  let found: ts.ObjectLiteralExpression | undefined;
  const visit = (node: ts.Node) => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.name.text === expression.text) found = objectOf(node.initializer, source);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The options of the first parseArgs call in `text`; 'computed' when they are not written out; undefined: no call. */
export function parseArgsOptionsIn(file: string, text: string): Accepts | 'computed' | undefined {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  let call: ts.CallExpression | undefined;
  const visit = (node: ts.Node) => {
    if (!call && ts.isCallExpression(node) && node.expression.getText() === 'parseArgs') call = node;
    ts.forEachChild(node, visit);
  };
  visit(source);
  if (!call) return undefined;
  const config = objectOf(call.arguments[0], source);
  const property = (object: ts.ObjectLiteralExpression, name: string) => object.properties.find((one) => keyOf(one) === name);
  const strict = config && property(config, 'strict');
  if (strict && ts.isPropertyAssignment(strict) && strict.initializer.kind === ts.SyntaxKind.FalseKeyword) return { kind: 'anything' };
  const optionsProperty = config && property(config, 'options');
  const options = optionsProperty && objectOf(ts.isShorthandPropertyAssignment(optionsProperty) ? optionsProperty.name : ts.isPropertyAssignment(optionsProperty) ? optionsProperty.initializer : undefined, source);
  if (!options || options.properties.some((one) => !ts.isPropertyAssignment(one) || keyOf(one) === undefined)) return 'computed';
  const shortOf = (option: ts.ObjectLiteralElementLike) => {
    const value = ts.isPropertyAssignment(option) ? objectOf(option.initializer, source) : undefined;
    const short = value && property(value, 'short');
    return short && ts.isPropertyAssignment(short) && ts.isStringLiteral(short.initializer) ? [short.initializer.text] : [];
  };
  return { kind: 'flags', long: options.properties.map((one) => keyOf(one)!), short: options.properties.flatMap(shortOf) };
}
