import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI, swarm, tempDir } from '../helpers/cli.js';

/**
 * `swarm up` run by another local user against a state directory they may not write (root's swarm,
 * or one run as root once and world-writable since) said `SWARM_ERR_INTERNAL EACCES`, and in the
 * world-writable case replaced the owner's token first. It is refused as SWARM_ERR_STATE_ACCESS
 * (exit 2) naming the file and its owner, before anything is written, as down and status do.
 */

const NOBODY = 65534;
const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => fs.existsSync(p));
const skip = process.getuid?.() !== 0 ? 'needs root (to run swarm as another user)' : !setpriv ? 'needs setpriv (util-linux)' : false;

/** `swarm ARGS` as uid nobody (without tap's process-info hook in NODE_OPTIONS: it writes into the checkout, which nobody may not). */
function asNobody(args: string[]) {
  const r = spawnSync(setpriv!, [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '/usr/bin/env', '-u', 'NODE_OPTIONS', process.execPath, CLI, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, signal: r.signal, stderr: r.stderr, stdout: r.stdout };
}

t.test('swarm up against another user\'s state directory is SWARM_ERR_STATE_ACCESS naming file and owner', { skip }, async (t) => {
  const base = tempDir(t);
  fs.chmodSync(base, 0o755);
  const dir = path.join(base, 'state');
  let r = swarm(['up', '-d', '--driver', 'echo', '--agents', '1', '--state-dir', dir]);
  t.equal(r.code, 0, r.stderr);
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
  const up = () => asNobody(['up', '-d', '--driver', 'echo', '--agents', '1', '--state-dir', dir]);

  // As made: owner-only.
  r = up();
  t.equal(r.code, 2, 'exit 2');
  t.match(r.stderr, /SWARM_ERR_STATE_ACCESS/);
  t.notMatch(r.stderr, /SWARM_ERR_INTERNAL/);
  t.match(r.stderr, new RegExp(`${dir}.*belongs to uid 0`), 'names the path and its owner');

  // World-writable, its files still root's: refused before a token of nobody's replaces root's.
  fs.chmodSync(dir, 0o777);
  const token = fs.readFileSync(path.join(dir, 'token'), 'utf8');
  r = up();
  t.equal(r.code, 2, r.stderr);
  t.match(r.stderr, /SWARM_ERR_STATE_ACCESS: cannot write .*belongs to uid 0/);
  t.equal(fs.readFileSync(path.join(dir, 'token'), 'utf8'), token, 'the owner\'s token is untouched');
  t.equal(fs.statSync(path.join(dir, 'token')).uid, 0);
  t.notOk(fs.existsSync(path.join(dir, 'starting')) && fs.readdirSync(path.join(dir, 'starting')).length, 'no starting mark left');

  // A new state directory under a folder this user may not write.
  r = asNobody(['up', '-d', '--driver', 'echo', '--agents', '1', '--state-dir', path.join(base, 'new')]);
  t.equal(r.code, 2, r.stderr);
  t.match(r.stderr, new RegExp(`SWARM_ERR_STATE_ACCESS: cannot write ${path.join(base, 'new')}.*\\(${base} belongs to uid 0\\)`));

  // The owner still brings it up.
  fs.chmodSync(dir, 0o700);
  r = swarm(['up', '-d', '--driver', 'echo', '--agents', '1', '--state-dir', dir]);
  t.equal(r.code, 0, r.stderr);
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
});
