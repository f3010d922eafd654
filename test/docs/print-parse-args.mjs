/**
 * Preloaded into a script (`node --import`) by the docs check: the script's first parseArgs call
 * prints the options it was given, as JSON, and ends the process before the script does any work.
 * What a script accepts is what its parser is told, read from the parser itself.
 */
import { syncBuiltinESMExports } from 'node:module';
import util from 'node:util';

util.parseArgs = (config = {}) => {
  const options = Object.entries(config.options ?? {});
  const accepts = {
    strict: config.strict !== false,
    long: options.map(([name]) => name),
    short: options.flatMap(([, option]) => (option.short ? [option.short] : [])),
  };
  process.stdout.write(JSON.stringify(accepts));
  process.exit(0);
};
syncBuiltinESMExports();
