import { pino, type Logger } from 'pino';

/**
 * JSON logs on stdout. Payloads never appear at info: stages log ids, types and positions.
 * The destination is synchronous so the last lines before a crash are not lost.
 */
export function createLogger(level: string, name = 'outbox-relay'): Logger {
  return pino({ name, level, base: { pid: process.pid } }, pino.destination({ sync: true }));
}
