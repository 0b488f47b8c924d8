import fs from 'node:fs';
import path from 'node:path';
import pino, { type Logger, type LoggerOptions } from 'pino';

/** A pino logger writing to a file in the state directory (or stderr when no file is given). */
export function makeLogger(name: string, file?: string, level = process.env.SWARM_LOG_LEVEL ?? 'info', extra: LoggerOptions = {}): Logger {
  if (!file) return pino({ name, level, ...extra }, pino.destination(2));
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // Opened here, synchronously: a destination given a path opens it later, and a process that exits
  // before then (a hub whose port is taken) dies in pino's exit hook instead of printing its error.
  const fd = fs.openSync(file, 'a');
  return pino({ name, level, ...extra }, pino.destination({ dest: fd, sync: false }));
}
