import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { CLI, alive, swarm, tempDir, until } from '../helpers/cli.js';
import { lockStopping } from '../../cli/state-lock.js';

/**
 * `swarm hub` started on its own while a `swarm down` stops the swarm of its state directory: it came
 * up beside the stopping swarm (as `swarm up` did before it learnt to wait), and the `down` then
 * stopped what it found. It now waits for that stop to end, as `swarm up` does. The `down` under way
 * is this test holding the directory's stop lock, as a `down` holds it while it stops.
 */

t.test('swarm hub waits while a swarm down stops the swarm of its state directory, then starts', { skip: process.platform !== 'linux' && 'the stop lock is Linux only' }, async (t) => {
  const dir = path.join(tempDir(t), 'state');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stop = await lockStopping(dir);
  if (!stop || stop === 'held') throw new Error('the stop lock was not taken');
  const hub = spawn(process.execPath, [CLI, 'hub', '--state-dir', dir, '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  t.teardown(() => { try { process.kill(-hub.pid!, 'SIGKILL'); } catch { /* gone */ } });
  let err = '';
  hub.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  t.ok(await until(() => /is stopping the swarm in .*waiting for it to finish/.test(err), 30_000), `the hub says it waits for the stop (${err.trim()})`);
  t.notOk(fs.existsSync(path.join(dir, 'hub.json')), 'and has not started meanwhile');
  t.equal(hub.exitCode, null, 'it is still there');
  stop.release();
  t.ok(await until(() => fs.existsSync(path.join(dir, 'hub.json')), 30_000), 'once the stop has ended, the hub starts');
  const file = JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as { pid: number };
  t.equal(file.pid, hub.pid, 'it is the hub that waited');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0, 'down stops it');
  t.ok(await until(() => !alive(hub.pid!), 10_000), 'the hub is gone');
});
