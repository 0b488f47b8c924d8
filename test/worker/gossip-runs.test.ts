import t from 'tap';
import { simSwarm } from '../helpers/gossip-sim.js';
import { GossipRuns } from '../../worker/gossip/runs.js';
import { parseExperiment, resolveInputs, type RunSpec } from '../../topologies/index.js';

/**
 * Topology runs in gossip mode, on the simulated swarm (driven clock): the acting coordinator drives
 * a map-reduce from the replicated spec; when it dies, the next coordinator takes over from the
 * replicated results. The output must equal the fault-free run's, and every node ran to one result.
 */

const ITEMS = Array.from({ length: 60 }, (_, i) => `item ${i}`);
const spec: RunSpec = (() => {
  const experiment = parseExperiment(JSON.stringify({ name: 'mr', topology: 'map-reduce', inputs: { items: ITEMS }, map_reduce: { fan_in: 3 } }));
  return { experiment, inputs: resolveInputs(experiment, process.cwd()) };
})();
const RUN = 'run-1';

/** A swarm whose 3 lowest ids hold the run (as the hub's holders do), with the agent's wiring of coordinator -> runs. */
function swarmWithRun(seed: number) {
  const sw = simSwarm(10, { seed, taskMs: 100 });
  const runs = sw.nodes.map((n) => new GossipRuns(n.replica));
  runs.slice(0, 3).forEach((r) => r.merge([{ run: RUN, spec }]));
  const wire = () => sw.live().forEach((n) => runs[sw.nodes.indexOf(n)]!.setCoordinating(n.coordinator.isCoordinating));
  return { sw, runs, wire };
}

async function finish(sw: ReturnType<typeof simSwarm>, runs: GossipRuns[], wire: () => void, maxMs: number) {
  return sw.runUntil(() => runs.some((r) => r.outcomes.has(RUN)), maxMs, 50, wire);
}

t.test('the acting coordinator drives a map-reduce in gossip mode; a new coordinator takes over when it dies', async (t) => {
  const base = swarmWithRun(51);
  t.ok(await finish(base.sw, base.runs, base.wire, 120_000) !== undefined, 'the fault-free run finished in gossip mode');
  const want = base.runs[0]!.outcomes.get(RUN)!;
  t.ok(want.output.length > 0, 'with an output');
  for (const n of base.sw.nodes) n.stop();

  const { sw, runs, wire } = swarmWithRun(51);
  await sw.runUntil(() => sw.nodes.every((n) => n.mode === 'gossip'), 20_000, 50, wire);
  await sw.runUntil(() => (sw.nodes[0]!.replica.get(`${RUN}:reduce:1:0`)?.result !== undefined), 60_000, 50, wire);
  t.ok(runs[0]!.drivingCount === 1, 'w-000 drives the run');
  t.ok(sw.nodes[0]!.replica.get(`${RUN}:reduce:1:0`)?.result, 'a reducer it submitted is done');
  sw.kill(sw.nodes[0]!);
  runs[0]!.stopAll();
  t.ok(await finish(sw, runs, wire, 300_000) !== undefined, 'the run finished after the coordinator died');
  const got = runs[1]!.outcomes.get(RUN);
  t.ok(got, 'w-001, the next coordinator, finished it');
  t.equal(got?.output, want.output, 'the same output as the fault-free run');
  t.equal(got?.verdict, want.verdict, 'the same verdict');
  const ids = sw.nodes[1]!.replica.ids().filter((id) => id.startsWith(`${RUN}:`));
  await sw.runUntil(() => sw.live().every((n) => ids.every((id) => n.replica.get(id)?.result)), 60_000, 100);
  t.equal(ids.length, 60 + 20 + 7 + 3 + 1 + 1, 'every node of the run is in the replica');
  t.equal(sw.live().filter((n) => ids.some((id) => !n.replica.get(id)?.result)).length, 0, 'every live replica has every node done (none lost)');
  const disagree = ids.filter((id) => new Set(sw.live().map((n) => `${n.replica.get(id)?.result?.worker}/${n.replica.get(id)?.result?.attempt}`)).size > 1).length;
  t.equal(disagree, 0, 'every replica holds the same result for every node (none duplicated)');
  for (const n of sw.live()) n.stop();
});
