import fs from 'node:fs';
import path from 'node:path';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { droppingDestination } from './log-dest.js';

/**
 * A pino logger writing to a file in the state directory (or stderr when no file is given), through
 * a destination that drops lines it cannot write (cli/log-dest.ts): logging never blocks or kills
 * the process, a full disk included.
 */
export function makeLogger(name: string, file?: string, level = process.env.SWARM_LOG_LEVEL ?? 'info', extra: LoggerOptions = {}): Logger {
  if (!file) return pino({ name, level, ...extra }, droppingDestination(2) as unknown as DestinationStream);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // Opened here, synchronously: a process that exits at once (a hub whose port is taken) still has
  // its file to write its last lines to.
  const fd = fs.openSync(file, 'a');
  return pino({ name, level, ...extra }, droppingDestination(fd) as unknown as DestinationStream);
}
