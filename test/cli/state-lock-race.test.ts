import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { lockStopping } from '../../cli/state-lock.js';
import { tempDir } from '../helpers/cli.js';

/**
 * Two processes on a fresh state directory (`swarm down` right after `swarm up -d`) both look for its
 * lock-id: one finds none and makes it, the other's read found none just before. That one then took
 * the file it found there a moment later for a damaged one (SWARM_ERR_CONFIG, "it holds no lock id"),
 * and the down exited 2 and left the starting swarm running (down-starting.test.ts, once at load 10).
 * Here the race is played in this process: the read finds no file, and the other process's lock-id
 * appears, whole (link(2)), before anything else is looked at.
 */
t.test('a lock-id made by another process just after this one found none is read, not called damaged', async (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'lock-id');
  const theirs = crypto.randomBytes(16).toString('hex');
  const read = fs.readFileSync;
  let raced = false;
  // The module reads through node:fs's own object: the patch is what it calls.
  (fs as { readFileSync: unknown }).readFileSync = ((p: fs.PathOrFileDescriptor, o?: unknown) => {
    if (p === file && !raced) {
      raced = true;
      // The other process, as lockId makes it: written aside, then linked into place whole.
      const tmp = `${file}.other`;
      fs.writeFileSync(tmp, `${theirs}\n`, { mode: 0o600 });
      fs.linkSync(tmp, file);
      fs.rmSync(tmp);
      throw Object.assign(new Error(`ENOENT: no such file or directory, open '${file}'`), { code: 'ENOENT' });
    }
    return read(p, o as never);
  }) as typeof fs.readFileSync;
  t.teardown(() => { (fs as { readFileSync: unknown }).readFileSync = read; });

  let lock: Awaited<ReturnType<typeof lockStopping>>;
  try { lock = await lockStopping(dir); } catch (e) { lock = undefined; t.fail(`refused: ${(e as Error).message}`); }
  t.ok(raced, 'the read raced the other process');
  t.ok(lock === 'held' || (lock !== undefined && typeof lock === 'object'), 'the lock is taken (or held by another), not refused');
  if (lock && typeof lock === 'object') lock.release();
  t.equal(read(file, 'utf8').trim(), theirs, 'the other process\'s id stands: none was made over it');
});
