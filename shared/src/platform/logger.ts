import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** JSON logs, one object per line (stdout unless a destination is given), with the process name on every line. */
export function createLogger(name: string, level: string, destination?: DestinationStream): Logger {
  return pino(
    {
    level,
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}
