import fs from 'node:fs';
import { InvalidArgumentError } from 'commander';
import { MAX_CAPS, MAX_SHORT_TEXT } from '../protocol/bounds.js';

/** A PEM certificate, key or CA bundle is a few KB; a large CA bundle a few hundred. */
export const MAX_PEM_BYTES = 4 * 1024 * 1024;

/**
 * An option naming a certificate, key or CA file: a readable regular file of at most MAX_PEM_BYTES,
 * checked when parsed. Read whole later, a device (`/dev/zero`) killed the hub with std::bad_alloc,
 * and a directory or a missing file stopped it as a bug (SWARM_ERR_INTERNAL) after `up` had started it.
 */
export function pemFile(v: string): string {
  let st: fs.Stats;
  try { st = fs.statSync(v); } catch (err) {
    throw new InvalidArgumentError(`${v}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  if (!st.isFile()) throw new InvalidArgumentError(`${v} is not a file (a PEM certificate, key or CA)`);
  if (st.size > MAX_PEM_BYTES) throw new InvalidArgumentError(`${v} is ${st.size} bytes; a PEM certificate, key or CA bundle is far smaller (at most ${MAX_PEM_BYTES / 1048576} MiB)`);
  try { fs.accessSync(v, fs.constants.R_OK); } catch { throw new InvalidArgumentError(`${v} cannot be read (permission denied)`); }
  return v;
}

/**
 * --caps: comma-separated, at most MAX_CAPS of at most MAX_SHORT_TEXT characters each (a HANDSHAKE's `caps`, protocol/bounds.ts). Past them every HANDSHAKE
 * was refused (SWARM_ERR_BAD_PAYLOAD) and `up` waited its whole ready timeout at "workers ready 0/N".
 * Kept as given (the workers parse it again).
 */
export function capsList(v: string): string {
  const caps = v.split(',').map((c) => c.trim()).filter(Boolean);
  if (caps.length > MAX_CAPS) throw new InvalidArgumentError(`${caps.length} capabilities; a worker has at most ${MAX_CAPS}`);
  const long = caps.find((c) => c.length > MAX_SHORT_TEXT);
  if (long) throw new InvalidArgumentError(`a capability has at most ${MAX_SHORT_TEXT} characters (one has ${long.length})`);
  return v;
}
