/**
 * `npm start`: every service in services.json (or SERVICES_FILE) and the gateway, each with
 * `npm start` in its workspace, their logs prefixed with their names. PORT and METRICS_PORT move
 * the gateway; each service listens on its port in the list, and serves its metrics on the one
 * shared/src/platform/services.ts gives it (FIRST_SERVICE_METRICS_PORT); METRICS_PORT=0 puts
 * every process's metrics on a free port (tests run several at once). The npm script builds first and sets the development
 * public key. MySQL and Redis are the configured ones when they answer, else the project's own
 * (scripts/setup/local-servers.ts), stopped after the processes that use them.
 *
 * `npm start -- --idp [--idp-port 9000]` runs the development OpenID provider (scripts/idp.ts)
 * beside them, in this process, and points the gateway at it by discovery (AUTH_DISCOVERY) instead
 * of the development key.
 *
 * A SIGINT or SIGTERM stops them all gracefully, each process getting the signal once: the
 * commands run in process groups of their own, so a terminal's Ctrl-C reaches only this script
 * (and the npm running it, which passes it on: two arrive here), and this script passes the first
 * signal it gets to each command's npm, which passes it to its process. concurrently's own
 * signal handling would pass every signal on to every process of each command's tree.
 */
import { spawn, type SpawnOptions } from 'node:child_process';
import { parseArgs } from 'node:util';
import { createConcurrently, LogError, LogExit, LogOutput, Logger, type CloseEvent, type Command, type FlowController } from 'concurrently';
// The sources, run as they are: nothing to build for the list.
import { readServiceList } from '../shared/src/platform/services.ts';
import { bringStartServers } from './setup/local-servers.ts';
import { dyingWithParent } from './setup/servers.ts';
import { MissingNeeds } from './setup/provision.ts';

const COLORS = ['blue', 'magenta', 'cyan', 'yellow', 'red', 'gray'];
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** Passes the first signal this process gets to each command, once; later ones change nothing. */
class FirstSignalOnce implements FlowController {
  caught: NodeJS.Signals | undefined;

  handle(commands: Command[]) {
    const onSignal = (signal: NodeJS.Signals) => {
      if (this.caught !== undefined) return;
      this.caught = signal;
      for (const command of commands) command.kill(signal);
    };
    for (const signal of SIGNALS) process.on(signal, onSignal);
    return { commands, onFinish: () => SIGNALS.forEach((signal) => process.off(signal, onSignal)) };
  }
}

const say = (line: string) => console.log(`npm start: ${line}`);
const { values: flags } = parseArgs({ options: { idp: { type: 'boolean', default: false }, 'idp-port': { type: 'string' } } });
const services = readServiceList(process.env.SERVICES_FILE || undefined);
const servers = await bringStartServers(process.env, say).catch((error: unknown) => {
  console.error(error instanceof MissingNeeds ? error.message : error);
  process.exit(1);
});
const gateway = `http://${process.env.HOST ?? '127.0.0.1'}:${process.env.PORT ?? 8080}`;
const { gatewayAuth, tokenHow, stopIdp } = await identity(flags.idp, flags['idp-port']).catch(async (error: unknown) => {
  console.error(`npm start: the OpenID provider did not start: ${String(error)}`);
  await servers.stop();
  process.exit(1);
});

/** Where the gateway's keys come from: the development key the npm script set, or the provider it starts here. */
async function identity(withIdp: boolean, idpPort: string | undefined) {
  const devToken = `a token: TOKEN=$(npm run -s token); then curl -H "Authorization: Bearer $TOKEN" ${gateway}/api/products`;
  if (!withIdp) return { gatewayAuth: {}, tokenHow: [devToken], stopIdp: async () => undefined };
  // Loaded only when asked for: the provider is a development dependency.
  const { IDP_AUDIENCE, IDP_DEFAULT_PORT, startIdp, tokenCurl } = await import('./idp.ts');
  const idp = await startIdp({ port: idpPort === undefined ? IDP_DEFAULT_PORT : Number(idpPort) });
  return {
    gatewayAuth: { AUTH_PUBLIC_KEY: '', AUTH_DISCOVERY: 'true', AUTH_ISSUER: idp.issuer, AUTH_AUDIENCE: IDP_AUDIENCE },
    tokenHow: [`the OpenID provider: ${idp.issuer} (jwks_uri ${idp.jwksUri})`, `a token (its access_token): ${tokenCurl(idp)}`],
    stopIdp: () => idp.close(),
  };
}
const commands = [
  ...services.map(({ name, workspace, port, metricsPort, schema }, i) => ({
    name,
    command: `exec npm start -w ${workspace}`,
    env: {
      PORT: String(port),
      METRICS_PORT: process.env.METRICS_PORT === '0' ? '0' : String(metricsPort),
      ...(servers.mysqlUrl ? { DATABASE_URL: `${servers.mysqlUrl}/${schema}` } : {}),
    },
    prefixColor: COLORS[i % COLORS.length],
  })),
  { name: 'gateway', command: 'exec npm start -w gateway', env: { ...(servers.redisUrl ? { REDIS_URL: servers.redisUrl } : {}), ...gatewayAuth }, prefixColor: 'green' },
];
for (const line of [
  ...servers.where,
  `the gateway: ${gateway} (each service on its port in services.json)`,
  ...(process.env.METRICS_PORT === '0' ? [] : [`metrics: GET /metrics on 127.0.0.1:${process.env.METRICS_PORT || 9464} (gateway), ${services.map(({ name, metricsPort }) => `${metricsPort} (${name})`).join(', ')}`]),
  ...tokenHow,
  'Ctrl-C stops everything it started',
]) {
  say(line);
}

const logger = new Logger({});
const signals = new FirstSignalOnce();
const { result } = createConcurrently(commands, {
  logger,
  outputStream: process.stdout,
  // A group of its own per command (detached): signals reach it only through this script, or
  // SIGTERM from the kernel when this script is killed outright (dyingWithParent).
  spawn: (command: string, options: SpawnOptions) => spawn(...dyingWithParent('/bin/sh', ['-c', command]), { ...options, detached: true }),
  // The command's npm only (not its whole tree, as tree-kill would): npm passes it to its process.
  kill: (pid: number, signal?: string) => process.kill(pid, signal as NodeJS.Signals),
  controllers: [new LogError({ logger }), new LogOutput({ logger }), new LogExit({ logger }), signals],
});
// Each one's exit was logged; the run fails when one of them failed. npm re-raises the signal it
// passed on once its process is done, so ending by that signal is a graceful stop. No
// process.exit: this process reads their output until it ends.
await result.catch((closed: CloseEvent[]) => {
  if (closed.some(({ exitCode }) => exitCode !== 0 && exitCode !== signals.caught)) process.exitCode = 1;
});
await stopIdp();
await servers.stop();
