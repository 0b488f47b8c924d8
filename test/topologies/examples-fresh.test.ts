import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, swarm, tempDir } from '../helpers/cli.js';
import { STORIES, missingPrereq } from '../helpers/llama.js';

const STORIES_SHA = '270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d';

/** The examples as a fresh clone has them: no ../shared beside the repo. */
function clone(dir: string): string {
  const ex = path.join(dir, 'clone', 'topologies', 'examples');
  fs.cpSync(path.join(ROOT, 'topologies', 'examples'), ex, { recursive: true });
  return ex;
}

interface Passport { models: { role: string; path: string; sha256?: string; error?: string }[] }
const passport = (runDir: string) => JSON.parse(fs.readFileSync(path.join(runDir, 'passport.json'), 'utf8')) as Passport;

t.test('examples run from a fresh clone on the default model; with --model the passport and reports name the model that ran', async (t) => {
  if (missingPrereq(t, !fs.existsSync(STORIES) ? { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` } : {})) return;
  const dir = tempDir(t);
  const ex = clone(dir);
  t.notOk(fs.existsSync(path.join(dir, 'shared')), 'no ../shared beside the clone');
  const cwd = path.join(dir, 'clone');

  const a = swarm(['run', 'topologies/examples/star.yaml', '--state-dir', path.join(dir, 'state'), '--agents', '2', '--json'], { cwd, timeoutMs: 240_000 });
  t.equal(a.code, 0, a.stderr);
  const va = JSON.parse(a.stdout) as { dir: string; outcome: { verdict: string } };
  t.equal(va.outcome.verdict, 'done');
  const pa = passport(va.dir);
  t.ok(pa.models.length > 0 && pa.models.every((m) => m.sha256 && !m.error), `the passport names the default model: ${pa.models[0]?.path}`);
  t.match(a.stderr, /still running .*swarm down --state-dir/, 'swarm run says it leaves the swarm it started running');
  swarm(['down', '--state-dir', path.join(dir, 'state')]);

  const b = swarm(['run', path.join(ex, 'star.yaml'), '--model', STORIES, '--state-dir', path.join(dir, 'state2'), '--agents', '2', '--json'], { cwd, timeoutMs: 240_000 });
  t.equal(b.code, 0, b.stderr);
  const vb = JSON.parse(b.stdout) as { dir: string };
  const pb = passport(vb.dir);
  t.ok(pb.models.length > 0 && pb.models.every((m) => m.path === path.resolve(STORIES) && m.sha256 === STORIES_SHA), 'every role: the model given with --model, by sha256');
  t.match(fs.readFileSync(path.join(vb.dir, 'report.md'), 'utf8'), /model \(agent\): .*stories260K\.gguf sha256 270cba1bd5109f42/);
  t.match(fs.readFileSync(path.join(vb.dir, 'report.html'), 'utf8'), /stories260K\.gguf/);

  // The arithmetic experiment on the same running swarm, three items, one round.
  const c = swarm(['run', path.join(ex, 'arithmetic-debate.yaml'), '--model', STORIES, '--set', 'inputs.limit=3', '--set', 'limits.rounds=1',
    '--state-dir', path.join(dir, 'state2'), '--json'], { cwd, timeoutMs: 240_000 });
  t.equal(c.code, 0, c.stderr);
  const vc = JSON.parse(c.stdout) as { dir: string; outcome: { verdict: string; details: { experiment: { conditions: { name: string; n: number }[] } } } };
  t.equal(vc.outcome.verdict, 'scored');
  t.same(vc.outcome.details.experiment.conditions.map((x) => [x.name, x.n]), [['diamond-debate', 3], ['single', 3], ['majority_vote', 3]]);
  t.ok(passport(vc.dir).models.every((m) => m.sha256 === STORIES_SHA), 'the experiment\'s passport names stories260K for every role');
  t.match(fs.readFileSync(path.join(vc.dir, 'experiment.html'), 'utf8'), /driver batched on stories260K\.gguf \(sha256 270cba1bd510/);
  t.notMatch(fs.readFileSync(path.join(vc.dir, 'experiment.html'), 'utf8'), /SIMULATED/);
});
