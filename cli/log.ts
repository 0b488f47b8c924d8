import fs from 'node:fs';
import path from 'node:path';
import pino, { type Logger, type LoggerOptions } from 'pino';

/** A pino logger writing to a file in the state directory (or stderr when no file is given). */
export function makeLogger(name: string, file?: string, level = process.env.SWARM_LOG_LEVEL ?? 'info', extra: LoggerOptions = {}): Logger {
  if (!file) return pino({ name, level, ...extra }, pino.destination(2));
  fs.mkdirSync(path.dirname(file), { recursive: true });
  return pino({ name, level, ...extra }, pino.destination({ dest: file, sync: false, mkdir: true }));
}
