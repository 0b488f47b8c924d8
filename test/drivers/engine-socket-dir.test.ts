import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { enginePaths } from '../../drivers/batched/index.js';

/**
 * A state directory too long for a Unix socket path puts the batched engine's socket under the
 * system's temp dir, in a folder whose name anyone can guess (`swarm-eng-<uid>`). Another local user
 * who made that folder first (mode 0777) could replace the socket and answer every prompt.
 */
t.test('the short socket folder is not one another user made first', async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-sockdir-'));
  t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = tmp;
  t.teardown(() => { if (saved === undefined) delete process.env.TMPDIR; else process.env.TMPDIR = saved; });
  const squat = path.join(tmp, `swarm-eng-${process.getuid?.() ?? 'u'}`);
  fs.mkdirSync(squat, { mode: 0o777 });
  fs.chmodSync(squat, 0o777);
  // As root, hand it to nobody, as the other user would have it.
  if (process.getuid?.() === 0) fs.chownSync(squat, 65534, 65534);
  const longDir = '/tmp/' + 'x'.repeat(120);
  const key = { model: '/m.gguf', ctx: 2048, threads: 1 } as const;
  if (process.getuid?.() === 0) {
    t.throws(() => enginePaths(longDir, key), /not a folder of this user \(owner uid 65534\)/, "another user's folder: refused, naming its owner");
    fs.chownSync(squat, 0, 0);
  }
  // Ours but open to everyone (made so by an old version or by hand): closed before use.
  const socket = enginePaths(longDir, key).socket;
  const dir = fs.lstatSync(path.dirname(socket));
  t.equal(path.dirname(socket), squat);
  t.equal(dir.uid, process.getuid?.(), 'the socket folder is ours');
  t.equal(dir.mode & 0o077, 0, 'and no one else may write in it');
  // A symlink in its place, to a folder of ours elsewhere: refused, not followed.
  fs.rmSync(squat, { recursive: true });
  const elsewhere = fs.mkdtempSync(path.join(tmp, 'elsewhere-'));
  fs.symlinkSync(elsewhere, squat);
  t.throws(() => enginePaths(longDir, key), /a symlink/, 'a symlink in its place: refused');
});
