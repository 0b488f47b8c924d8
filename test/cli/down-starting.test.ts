import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CLI, pidsMentioning, sleep, tempDir, until } from '../helpers/cli.js';

/**
 * `swarm down` during the first moments of `swarm up -d`: it said "no swarm was running" and exited,
 * and the swarm came up behind it and kept running. It must stop what is starting and say so.
 */

interface Run { code: number | null; out: string; exited: Promise<void> }

function run(args: string[]): Run {
  const c = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const r: Run = { code: null, out: '', exited: new Promise((resolve) => c.on('exit', (code) => { r.code = code; resolve(); })) };
  c.stdout.on('data', (d: Buffer) => { r.out += d.toString(); });
  c.stderr.on('data', (d: Buffer) => { r.out += d.toString(); });
  return r;
}

t.test('swarm down right after swarm up -d: nothing of the swarm is left, and down says it stopped it', async (t) => {
  const base = tempDir(t);
  // Different moments of the start: before the hub is spawned, while it loads, as it writes hub.json,
  // each counted from when up made the state directory (a `down` that runs before `up` has done
  // anything at all cannot know of it).
  for (const [round, delay] of [0, 150, 400].entries()) {
    const state = path.join(base, `state${round}`);
    const up = run(['up', '-d', '--state-dir', state, '--driver', 'echo', '--agents', '1', '--no-failover', '--ready-timeout', '30000']);
    t.teardown(() => { for (const p of pidsMentioning(state)) try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } });
    t.ok(await until(() => fs.existsSync(state), 30_000, 5), `round ${round}: up made the state directory`);
    await sleep(delay);
    const down = run(['down', '--state-dir', state]);
    await down.exited;
    await Promise.race([up.exited, sleep(30_000)]);
    t.equal(down.code, 0, `round ${round}: down exits 0 (${down.out.trim()})`);
    t.match(down.out, /stopped/, `round ${round}: down says it stopped the swarm`);
    t.notMatch(down.out, /no swarm was running/, `round ${round}: never "not running" while one starts`);
    // A hub that came up anyway would be running (and its worker) well after `up` returned.
    await sleep(1000);
    t.ok(await until(() => pidsMentioning(state).length === 0, 10_000), `round ${round}: no process of the state directory is alive (${pidsMentioning(state).join(',')})`);
  }
});
