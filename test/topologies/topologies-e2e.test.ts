import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RunManager } from '../../hub/runs.js';
import { WorkerPool } from '../../worker/index.js';
import { driverNames } from '../../drivers/index.js';
import { parseExperiment } from '../../topologies/index.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { STORIES, missingPrereq } from '../helpers/llama.js';
import { ROOT } from '../helpers/paths.js';

const EXAMPLES = path.join(ROOT, 'topologies/examples');
/** What each example may end in on stories260K (its text is children's stories, not verdicts). */
const EXPECT: Record<string, RegExp> = {
  'star.yaml': /^(done)$/,
  'pipeline.yaml': /^(approved|rejected)$/,
  'diamond-debate.yaml': /^(approved|no-consensus|aborted)$/,
  'arena.yaml': /^(winner|no-verdict)$/,
  'map-reduce.yaml': /^(pass|fail)$/,
  'strict-chain.yaml': /^(passed|stopped)$/,
};

t.test('every example runs end to end on stories260K through the embedded engine', async (t) => {
  const prereq = !fs.existsSync(STORIES) ? { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` }
    : !driverNames().includes('embedded') ? { missing: 'the embedded driver is not registered in drivers/index.ts' } : {};
  if (missingPrereq(t, prereq)) return;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-e2e-'));
  const h = await startHub({ stateDir: dir });
  t.teardown(async () => { await h.stop(); fs.rmSync(dir, { recursive: true, force: true }); });
  const pool = new WorkerPool({
    ids: ['e-1', 'e-2'], driver: { name: 'embedded', model: STORIES, options: { ctx: '512' } }, locate: async () => h.addr,
  }, quiet);
  const done = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await done; });
  t.ok(await waitWorkers(h.hub, 2));
  const runs = new RunManager(h.hub, { dir: path.join(dir, 'runs'), version: 'test', log: quiet });
  const first: Record<string, string> = {};
  for (const name of Object.keys(EXPECT)) {
    const file = path.join(EXAMPLES, name);
    // The examples name no model (they run on the swarm's default); the workers here run stories260K, and the passport says so.
    const exp = parseExperiment(fs.readFileSync(file, 'utf8'), { source: file });
    const { run } = await runs.start({ experiment: exp, base_dir: EXAMPLES, model: STORIES });
    const out = await runs.wait(run)!;
    t.match(out.verdict, EXPECT[name]!, `${name}: ${out.verdict} (${out.reason ?? ''})`);
    first[name] = run;
    const rd = path.join(dir, 'runs', run);
    const nodes = fs.readdirSync(path.join(rd, 'nodes'));
    t.ok(nodes.length > 0, `${name}: ${nodes.length} node folders`);
    const failed = out.progress.failed;
    t.equal(failed, 0, `${name}: no node failed on the engine`);
    const passport = JSON.parse(fs.readFileSync(path.join(rd, 'passport.json'), 'utf8')) as { models: { sha256?: string }[] };
    t.equal(passport.models[0]?.sha256, '270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d', `${name}: passport names the model by sha256`);
    await new Promise((r) => setTimeout(r, 50)); // let the report writes land before the next run
    t.ok(fs.existsSync(path.join(rd, 'report.html')), `${name}: report.html`);
  }

  // A replay (same spec, seed and settings) at temperature 0 gives the same outputs, node by node.
  const rd = path.join(dir, 'runs', first['pipeline.yaml']!);
  const spec = JSON.parse(fs.readFileSync(path.join(rd, 'spec.json'), 'utf8')) as { experiment: unknown; inputs: never };
  const { run } = await runs.start({ experiment: spec.experiment, inputs: spec.inputs, replay_of: first['pipeline.yaml'] });
  await runs.wait(run);
  const again = path.join(dir, 'runs', run);
  const outputs = (d: string) => fs.readdirSync(path.join(d, 'nodes')).sort().map((n) => [n, fs.readFileSync(path.join(d, 'nodes', n, 'output.txt'), 'utf8')]);
  t.same(outputs(again), outputs(rd), 'the replay produced the same outputs');
  t.equal((JSON.parse(fs.readFileSync(path.join(again, 'passport.json'), 'utf8')) as { replay_of: string }).replay_of, first['pipeline.yaml']);
});
