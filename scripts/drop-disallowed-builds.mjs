// Run by npm after every install (the root package's `postinstall`): removes what the install
// scripts of the packages `allowScripts` (package.json) marks `false` built with node-gyp.
//
// Why: npm 11 honours `allowScripts` and never runs those scripts; an older npm (Debian's npm 9)
// runs them anyway. ssh2's and cpu-features' scripts then build native bindings with whatever Node
// headers that npm is set to (Debian's: its Node 18's, /usr/include/nodejs) for the project's
// Node 24, which loads them: a binding compiled for another V8 corrupts the heap of any process
// that imports testcontainers (its Docker client loads ssh2). Both bindings are optional (ssh2
// falls back to JavaScript), so every machine runs without them, as npm 11 leaves it.
// Plain JavaScript: it runs under whichever Node the installing npm uses.
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The node-gyp build folders (`build/` holding `config.gypi`) under `dir`, nested node_modules left out. */
function* gypBuilds(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name === 'node_modules') continue;
    const sub = path.join(dir, entry.name);
    if (entry.name === 'build' && existsSync(path.join(sub, 'config.gypi'))) yield sub;
    else yield* gypBuilds(sub);
  }
}

/** Every installed copy of each package named, at any depth of `nodeModules`. */
function* copiesOf(nodeModules, names) {
  if (!existsSync(nodeModules)) return;
  for (const entry of readdirSync(nodeModules, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const scoped = entry.name.startsWith('@');
    const packages = scoped ? readdirSync(path.join(nodeModules, entry.name)).map((name) => `${entry.name}/${name}`) : [entry.name];
    for (const name of packages) {
      const dir = path.join(nodeModules, name);
      if (names.has(name)) yield dir;
      yield* copiesOf(path.join(dir, 'node_modules'), names);
    }
  }
}

/** Removes, under `root`, the node-gyp builds of the packages its package.json's `allowScripts` disallows; returns them. */
export function dropDisallowedBuilds(root) {
  const { allowScripts = {} } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
  const disallowed = new Set(Object.entries(allowScripts).flatMap(([name, allowed]) => (allowed ? [] : [name])));
  const dropped = [];
  for (const dir of copiesOf(path.join(root, 'node_modules'), disallowed)) {
    for (const build of gypBuilds(dir)) {
      rmSync(build, { recursive: true, force: true });
      dropped.push(path.relative(root, build));
    }
  }
  return dropped;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const build of dropDisallowedBuilds(process.cwd())) {
    console.log(`postinstall: removed ${build}, built by an install script package.json's allowScripts disallows (npm before 11 runs them)`);
  }
}
