import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NEEDS, type Need, type Purpose } from './needs.ts';

/** Where the project keeps what it brings for itself: git-ignored, never shared with another clone. */
export const LOCAL_DIR = fileURLToPath(new URL('../../.local/', import.meta.url));
export const LOCAL_BIN = path.join(LOCAL_DIR, 'bin');

// Servers' binaries live outside a user's PATH on some systems (Debian's mariadbd in /usr/sbin,
// Fedora's in /usr/libexec, Homebrew's in /opt/homebrew).
const EXTRA_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/libexec', '/opt/homebrew/bin', '/opt/homebrew/sbin'];

/** The absolute path of `program`, from the project's own .local/bin, the PATH or the servers' folders. */
export function findProgram(program: string): string | undefined {
  const dirs = [LOCAL_BIN, ...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...EXTRA_DIRS];
  for (const dir of dirs) {
    const candidate = path.join(dir, program);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here: the next folder.
    }
  }
  return undefined;
}

/** The first of `alternatives` this machine has. */
export function findOneOf(alternatives: string[]): string | undefined {
  for (const program of alternatives) {
    const found = findProgram(program);
    if (found) return found;
  }
  return undefined;
}

/** kustomize v5 reads the `labels` field k8s/ uses; older kubectls (Debian's 1.20) cannot. */
function kubectlIsRecentEnough(kubectl: string): boolean {
  const result = spawnSync(kubectl, ['version', '--client', '-o', 'json'], { encoding: 'utf8', timeout: 10_000 });
  const version = /"kustomizeVersion":\s*"v(\d+)/.exec(result.stdout ?? '');
  return version !== null && Number(version[1]) >= 5;
}

/** Whether this machine has what `need` provides. */
export function isPresent(need: Need): boolean {
  const found = need.programs.map((alternatives) => findOneOf(alternatives));
  if (found.some((program) => program === undefined)) return false;
  return need.programs[0]![0] === 'kubectl' ? kubectlIsRecentEnough(found[0]!) : true;
}

/** The needs of `purpose` this machine lacks. */
export function missingNeeds(purpose: Purpose): Need[] {
  return NEEDS.filter((need) => need.for.includes(purpose) && !isPresent(need));
}

export type PackageManager = 'apt' | 'dnf' | 'brew';

/** The package manager this OS installs with, or null when it is none the project knows. */
export function packageManager(): PackageManager | null {
  if (process.platform === 'darwin') return 'brew';
  if (existsSync('/etc/debian_version') && findProgram('apt-get')) return 'apt';
  if (findProgram('dnf')) return 'dnf';
  return null;
}

const INSTALL_COMMANDS: Record<PackageManager, { os: string; command: (packages: string[]) => string }> = {
  apt: { os: 'Debian/Ubuntu', command: (packages) => `sudo apt-get install -y ${packages.join(' ')}` },
  dnf: { os: 'Fedora', command: (packages) => `sudo dnf install -y ${packages.join(' ')}` },
  brew: { os: 'macOS', command: (packages) => `brew install ${packages.join(' ')}` },
};

/**
 * The one command that installs `needs` with `manager`; where it is unknown, or lacks a package
 * of theirs, one line per OS that has them all.
 */
export function installCommand(needs: Need[], manager = packageManager()): string {
  const hasAll = (m: PackageManager) => needs.every((need) => need.packages[m].length > 0);
  if (manager && hasAll(manager)) return INSTALL_COMMANDS[manager].command(needs.flatMap((need) => need.packages[manager]));
  const managers = (Object.keys(INSTALL_COMMANDS) as PackageManager[]).filter(hasAll);
  return managers.map((m) => `${INSTALL_COMMANDS[m].os}: ${INSTALL_COMMANDS[m].command(needs.flatMap((need) => need.packages[m]))}`).join('\n  ');
}

export const isRoot = () => process.getuid?.() === 0;

/**
 * Installs Debian packages as root, saying so first. A policy-rc.d that refuses every start keeps
 * the packages' own services (a system MariaDB on 3306) from starting: the project runs its own.
 */
export function aptInstall(packages: string[], say: (line: string) => void): void {
  say(`installing ${packages.join(' ')} from Debian packages (apt-get, as root)`);
  const policy = '/usr/sbin/policy-rc.d';
  const ownPolicy = !existsSync(policy);
  if (ownPolicy) writeFileSync(policy, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
    execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...packages], { stdio: ['ignore', 'ignore', 'inherit'], env });
  } finally {
    if (ownPolicy && readFileSync(policy, 'utf8').includes('exit 101')) rmSync(policy, { force: true });
  }
}
