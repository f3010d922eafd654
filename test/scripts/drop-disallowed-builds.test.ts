/**
 * The postinstall step: what an npm older than 11 built for a package `allowScripts` disallows is
 * removed, at any depth, and nothing else is.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { dropDisallowedBuilds } from '../../scripts/drop-disallowed-builds.mjs';

let root: string;
beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'drop-builds-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** A node-gyp build folder at `dir` (relative to the root). */
function gypBuild(dir: string): string {
  mkdirSync(path.join(root, dir, 'Release'), { recursive: true });
  writeFileSync(path.join(root, dir, 'config.gypi'), '{}');
  writeFileSync(path.join(root, dir, 'Release', 'binding.node'), '');
  return dir;
}

test('removes the node-gyp builds of disallowed packages, nested copies and scoped names too, and keeps the allowed ones', () => {
  writeFileSync(path.join(root, 'package.json'), JSON.stringify({ allowScripts: { ssh2: false, '@scope/native': false, node: true } }));
  const dropped = [
    gypBuild('node_modules/ssh2/lib/protocol/crypto/build'),
    gypBuild('node_modules/docker-modem/node_modules/ssh2/lib/protocol/crypto/build'),
    gypBuild('node_modules/@scope/native/build'),
  ];
  const kept = [gypBuild('node_modules/node/build'), gypBuild('node_modules/unlisted/build'), 'node_modules/ssh2/lib/build-tools'];
  mkdirSync(path.join(root, kept[2]!), { recursive: true });

  expect(dropDisallowedBuilds(root).toSorted()).toEqual(dropped.toSorted());
  for (const dir of dropped) expect(existsSync(path.join(root, dir))).toBe(false);
  for (const dir of kept) expect(existsSync(path.join(root, dir))).toBe(true);
});

test('does nothing without node_modules or allowScripts', () => {
  writeFileSync(path.join(root, 'package.json'), '{}');
  expect(dropDisallowedBuilds(root)).toEqual([]);
});
