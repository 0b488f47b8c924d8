import t from 'tap';
import { api, tempDir, until } from '../helpers/cli.js';
import { allInMode, endedOnHub, finishedInGossip, hubStatus, killGroup, procs, startHub, startWorkers, tallyRun, waitRun } from '../helpers/failover.js';

/**
 * The failover chaos test: kill -9 of the hub at a random moment, 20 trials, with 25 workers
 * on a 500-task map-reduce (373 mappers, 127 reducers with fan-in 4, a guard). One worker process (25
 * agents) lives through all trials; each trial starts the run on the current hub, kills the hub at a
 * random moment of it, lets the workers finish the run by gossip (the acting coordinator drives the
 * topology), restarts the hub on the same state dir (the next trial's hub), which resumes the run, and
 * checks that trial's run: every task's result present exactly once, and the final output and every
 * node's output identical to those of a fault-free run made first. Lost and duplicated are reported
 * per trial and asserted 0.
 */

const N = 25;
const ITEMS = Array.from({ length: 373 }, (_, i) => `item ${i}`);
const EXPERIMENT = { name: 'kill20', topology: 'map-reduce', inputs: { items: ITEMS }, map_reduce: { fan_in: 4 } };
const TASKS = 373 + 94 + 24 + 6 + 2 + 1 + 1;
const TRIALS = 20;
const LATENCY_MS = 20;
/**
 * Shorter hub-death timings than the defaults (3 s lapse, 1 s heartbeats), so 20 trials fit a CI
 * budget: heartbeats every 250 ms, a 1.5 s lapse, vetoes within 750 ms. The defaults are exercised by
 * failover-chaos.test.ts; the kill, the gossip run and the handback do not depend on them.
 */
const HUB_ARGS = ['--heartbeat-ms', '250'];
const WORKER_ARGS = ['--hub-lapse-ms', '1500'];

async function startRun(dir: string): Promise<string> {
  return (await api<{ run: string }>(dir, 'POST', '/runs', { experiment: EXPERIMENT })).run;
}

t.test(`kill -9 of the hub at a random moment, ${TRIALS} trials: every result once, outputs as without faults`, async (t) => {
  const dir = tempDir(t);
  const ps = procs(t);
  let hub = ps.add(await startHub(dir, HUB_ARGS));
  ps.add(startWorkers(dir, N, 'w', ['--driver-opt', `latency_ms=${LATENCY_MS}`, ...WORKER_ARGS]));
  t.ok(await until(async () => (await hubStatus(dir))?.failover?.workers.length === N, 60_000, 100), 'all workers joined with a peer port');

  // The fault-free run: its outputs are the reference, its length bounds the kill moment.
  const t0 = Date.now();
  const refRun = await startRun(dir);
  const ref = await waitRun(dir, refRun, 60_000);
  t.equal(ref?.state, 'done', 'the fault-free run finished');
  const baseMs = Date.now() - t0;
  const want = tallyRun(dir, refRun);
  t.equal(want.tasks, TASKS, `the run has ${TASKS} tasks`);
  t.equal(want.lost + want.duplicated, 0, 'the fault-free run has every result once');
  t.comment(`fault-free run: ${baseMs} ms`);

  let lostAll = 0, dupAll = 0, wrongAll = 0, outputsDiffer = 0;
  for (let trial = 1; trial <= TRIALS; trial++) {
    const killAfter = Math.floor(Math.random() * baseMs * 0.8);
    const run = await startRun(dir);
    await new Promise((r) => setTimeout(r, killAfter));
    killGroup(hub, 'SIGKILL');
    const k = Date.now();
    const inGossip = await allInMode(dir, 'gossip', N, 30_000);
    const gossipMs = Date.now() - k;
    // The acting coordinator drives the run to its end without a hub (unless the hub ended it before it died).
    let onHub = false;
    const finished = await until(() => finishedInGossip(dir, run) || (onHub = endedOnHub(dir, run)), 90_000, 50);
    const finishedMs = Date.now() - k;
    hub = ps.add(await startHub(dir, HUB_ARGS));
    const hubMs = Date.now() - k;
    const got = await waitRun(dir, run, 60_000);
    const star = await allInMode(dir, 'star', N, 60_000);
    const starMs = Date.now() - k;
    const r = tallyRun(dir, run);
    const differ = [...want.texts].filter(([node, text]) => r.texts.has(node) && r.texts.get(node) !== text);
    const wrong = differ.length;
    // What changed, so a failure says how (first differing node, both texts cut short).
    for (const [node, text] of differ.slice(0, 2)) t.comment(`trial ${trial}: node ${node} differs: want ${JSON.stringify(text.slice(0, 300))} got ${JSON.stringify(r.texts.get(node)?.slice(0, 300))}`);
    const same = got?.outcome?.output === ref?.outcome?.output && got?.outcome?.verdict === ref?.outcome?.verdict;
    lostAll += r.lost + Math.max(0, TASKS - r.tasks); dupAll += r.duplicated; wrongAll += wrong; if (!same) outputsDiffer++;
    t.comment(`trial ${trial}: killed ${killAfter} ms after the start; tasks=${r.tasks} lost=${r.lost} duplicated=${r.duplicated} wrong=${wrong} output ${same ? 'same' : 'DIFFERENT'}${onHub ? ' (the run had ended on the hub)' : ''}; ms after the kill: gossip ${gossipMs}, finished ${finishedMs}, hub up ${hubMs}, star ${starMs}`);
    if (!inGossip || !finished || got?.state !== 'done' || !star) {
      t.fail(`trial ${trial}: gossip=${inGossip} finished=${finished} run=${got?.state} star=${star}`);
      break;
    }
  }
  t.comment(`all trials: lost=${lostAll} duplicated=${dupAll} wrong=${wrongAll} outputs differing=${outputsDiffer}`);
  t.equal(lostAll, 0, 'no result lost in any trial');
  t.equal(dupAll, 0, 'no result recorded twice in any trial');
  t.equal(wrongAll, 0, 'every node output identical to the fault-free run');
  t.equal(outputsDiffer, 0, 'every run\'s final output and verdict identical to the fault-free run');
});
