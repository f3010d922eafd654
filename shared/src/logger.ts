import { pino, type Logger } from 'pino';

export type { Logger };

/** JSON logs on stdout, one object per line, with the process name on every line. */
export function createLogger(name: string, level: string): Logger {
  return pino({
    level,
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}
