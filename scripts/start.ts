/**
 * `npm start`: every service in services.json and the gateway, each with `npm start` in its
 * workspace, their logs prefixed with their names. A SIGINT or SIGTERM reaches each of them, and
 * each stops gracefully. The npm script builds first and sets the development public key.
 */
import concurrently from 'concurrently';
// The sources, run as they are: nothing to build for the list.
import { readServiceList } from '../shared/src/platform/services.ts';

const COLORS = ['blue', 'magenta', 'cyan', 'yellow', 'red', 'gray'];

const commands = [
  ...readServiceList().map(({ name, workspace }, i) => ({ name, command: `npm start -w ${workspace}`, prefixColor: COLORS[i % COLORS.length] })),
  { name: 'gateway', command: 'npm start -w gateway', prefixColor: 'green' },
];

const { result } = concurrently(commands);
// Each one's exit was logged; the run fails when one of them did (a signal is not a failure). No
// process.exit: a service may still be draining and logging after its npm wrapper has gone, and
// this process reads its output until it ends.
await result.catch(() => (process.exitCode = 1));
