// Restores package-lock.json entries for other platforms' optional native binaries
// (@swc/core-darwin-arm64, @unrs/resolver-binding-win32-x64-msvc, ...).
//
// Why: `npm install` against a registry mirror that lacks those binaries drops their entries, and
// `npm ci` then rejects the lockfile everywhere ("Missing: ... from lock file"). The platform is in
// each package's name, so the entry npm would have written can be rebuilt: with its os/cpu/libc,
// `npm ci` skips it on every other platform. Idempotent; run it after `npm install`.
import { readFileSync, writeFileSync } from 'node:fs';

const LOCKFILE = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(LOCKFILE, 'utf8'));
const PLATFORM_PACKAGE = /^(@swc\/core|@unrs\/resolver-binding)-([a-z0-9]+)-([a-z0-9]+)(?:-([a-z0-9]+))?$/;

function platformOf(name) {
  const [, , os, cpu, abi] = PLATFORM_PACKAGE.exec(name) ?? [];
  if (!os) return undefined;
  const libc = abi?.startsWith('gnu') ? ['glibc'] : abi?.startsWith('musl') ? ['musl'] : undefined;
  return { os: [os], cpu: [cpu], ...(libc && { libc }) };
}

let added = 0;
for (const entry of Object.values(lock.packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${name}`;
    const platform = platformOf(name);
    if (lock.packages[key] || !platform || !/^\d+\.\d+\.\d+$/.test(version)) continue;
    lock.packages[key] = { version, ...platform, optional: true };
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
writeFileSync(LOCKFILE, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`complete-lockfile: added ${added} platform entries`);
