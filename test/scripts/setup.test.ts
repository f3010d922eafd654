/**
 * The setup's pure parts: the one command it names for what is missing, per package manager, and
 * the stop it makes, before running anything, when a need can be neither found nor installed.
 */
import { installCommand } from '../../scripts/setup/machine.ts';
import { NEEDS, type Need } from '../../scripts/setup/needs.ts';
import { MissingNeeds, needNamed, provide } from '../../scripts/setup/provision.ts';

const servers = [needNamed('MySQL or MariaDB'), needNamed('Redis')];

describe('installCommand', () => {
  it.each([
    ['apt', 'sudo apt-get install -y mariadb-server redis-server'],
    ['dnf', 'sudo dnf install -y mariadb-server redis'],
    ['brew', 'brew install mariadb redis'],
  ] as const)('names the packages for %s', (manager, command) => {
    expect(installCommand(servers, manager)).toBe(command);
  });

  it("names every known OS's command when this one has no package manager it knows", () => {
    expect(installCommand(servers, null).split('\n  ')).toEqual([
      'Debian/Ubuntu: sudo apt-get install -y mariadb-server redis-server',
      'Fedora: sudo dnf install -y mariadb-server redis',
      'macOS: brew install mariadb redis',
    ]);
  });
});

describe('provide', () => {
  const absent: Need = { name: 'Absent', why: 'a test of the stop', for: ['test'], programs: [['no-such-program-of-this-project']], packages: { apt: [], dnf: [], brew: ['absent'] } };

  it('names, where the package manager lacks a package, the OSes that have them all', () => {
    expect(installCommand([needNamed('debootstrap')], 'brew')).toBe('Debian/Ubuntu: sudo apt-get install -y debootstrap\n  Fedora: sudo dnf install -y debootstrap');
  });

  it('stops naming each missing need, why it is needed and the command, having said nothing', () => {
    const said: string[] = [];
    let thrown: unknown;
    try {
      provide([absent], 'npm test', (line) => said.push(line));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(MissingNeeds);
    expect((thrown as MissingNeeds).message).toMatch(/^npm test needs what this machine lacks:\n {2}- Absent: a test of the stop\nInstall it with:\n {2}macOS: brew install absent$/);
    expect(said).toEqual([]);
  });

  it('does nothing when every need is present', () => {
    const present: Need = { ...absent, programs: [['no-such-program-of-this-project', 'node']] };
    expect(() => provide([present], 'npm test', () => undefined)).not.toThrow();
  });
});

it('every need says why, for which commands, and how each package manager installs it', () => {
  for (const need of NEEDS) {
    expect([need.name, need.why.length > 0, need.for.length > 0, need.programs.every((alternatives) => alternatives.length > 0)]).toEqual([need.name, true, true, true]);
    expect([need.name, need.npmPackage !== undefined || need.packages.apt.length > 0]).toEqual([need.name, true]);
  }
});
