import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { pidsMentioning, sleep, swarmRun, tempDir, until } from '../helpers/cli.js';

/**
 * `swarm down` during the first moments of `swarm up -d`: it said "no swarm was running" and exited,
 * and the swarm came up behind it and kept running. It must stop what is starting and say so.
 */

t.test('swarm down right after swarm up -d: nothing of the swarm is left, and down says it stopped it', async (t) => {
  const base = tempDir(t);
  // Different moments of the start: before the hub is spawned, while it loads, as it writes hub.json,
  // each counted from when up made the state directory (a `down` that runs before `up` has done
  // anything at all cannot know of it).
  for (const [round, delay] of [0, 150, 400].entries()) {
    const state = path.join(base, `state${round}`);
    const up = swarmRun(['up', '-d', '--state-dir', state, '--driver', 'echo', '--agents', '1', '--no-failover', '--ready-timeout', '30000']);
    t.teardown(() => { for (const p of pidsMentioning(state)) try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } });
    t.ok(await until(() => fs.existsSync(state), 30_000, 5), `round ${round}: up made the state directory`);
    await sleep(delay);
    const down = swarmRun(['down', '--state-dir', state]);
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
