import fs from 'node:fs';
import t from 'tap';
import { pidsMentioning, swarm, tempDir } from '../helpers/cli.js';

/**
 * hub.json removed or damaged while its hub runs (a careless cleanup, another tool): the CLI still
 * finds that hub by the state directory's lock, says it runs, and `swarm down` stops it.
 */
t.test('hub.json damaged or removed under a running swarm: swarm down still stops every process of it', async (t) => {
  for (const damage of ['garbled', 'removed']) {
    const dir = tempDir(t);
    t.equal(swarm(['up', '--agents', '2', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 }).code, 0, `${damage}: a swarm runs`);
    if (damage === 'garbled') fs.writeFileSync(`${dir}/hub.json`, '{garbage');
    else fs.rmSync(`${dir}/hub.json`);
    // Before, down waited, said "a hub is still starting ... run swarm down again" (exit 1), every time.
    const down = swarm(['down', '--timeout', '2000', '--state-dir', dir], { timeoutMs: 60_000 });
    t.equal(down.code, 0, `${damage}: down exits 0 (${down.stdout.trim()} ${down.stderr.trim()})`);
    t.match(down.stdout, /stopped the hub \(pid \d+\) found by the state directory's lock/, `${damage}: says how it found the hub`);
    t.same(pidsMentioning(dir), [], `${damage}: no process of it is left`);
    t.equal(swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 }).code, 0, `${damage}: a new swarm starts there`);
    t.equal(swarm(['down', '--state-dir', dir]).code, 0);
  }
});

t.test('hub.json removed under a running hub: status says a hub runs that it cannot reach, not "unreachable" or "no swarm"', async (t) => {
  const dir = tempDir(t);
  t.equal(swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 }).code, 0);
  t.teardown(() => { swarm(['down', '--timeout', '2000', '--state-dir', dir]); });
  fs.rmSync(`${dir}/hub.json`);
  const r = swarm(['status', '--state-dir', dir]);
  t.equal(r.code, 2, 'an error');
  t.match(r.stderr, /SWARM_ERR_STATE_ACCESS: a hub runs in .* \(pid \d+, holding its lock\) but its hub.json is missing or damaged/, 'says a hub runs and why it cannot be reached');
});
