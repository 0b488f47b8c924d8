import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RunManager } from '../../hub/runs.js';
import { WorkerPool } from '../../worker/index.js';
import { quiet, startHub, startPool, waitWorkers } from '../helpers/inproc.js';

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-runs-'));

/** Echo workers that take only tasks needing `caps`, answering `reply`. */
function capsPool(addr: { host: string; port: number }, k: number, prefix: string, caps: string[], reply: string) {
  const pool = new WorkerPool({
    ids: Array.from({ length: k }, (_, i) => `${prefix}-${i + 1}`),
    driver: { name: 'echo', options: { reply } }, locate: async () => addr, caps,
  }, quiet);
  const done = pool.run();
  return { pool, done, stop: () => pool.stop('test over') };
}

t.test('strict-chain through a real hub: STOP halts the chain mid-way; the run folder is written', async (t) => {
  const dir = tmp();
  const h = await startHub({ stateDir: dir });
  const ok = capsPool(h.addr, 2, 'ok', ['pass'], JSON.stringify({ action: 'CONTINUE', reason: '', output: 'masked text' }));
  const stop = capsPool(h.addr, 1, 'stop', ['stop'], JSON.stringify({ action: 'STOP', reason: 'found a passport number', output: '' }));
  t.teardown(async () => { await ok.stop(); await stop.stop(); await h.stop(); fs.rmSync(dir, { recursive: true, force: true }); });
  t.ok(await waitWorkers(h.hub, 3));
  const runs = new RunManager(h.hub, { dir: path.join(dir, 'runs'), version: 'test', log: quiet });
  const exp = {
    topology: 'strict-chain', inputs: { text: 'Ana, passport X123' },
    roles: { scanner: { caps: ['pass'] }, anonymizer: { caps: ['pass'] }, validator: { caps: ['stop'] }, auditor: { caps: ['pass'] } },
  };
  const { run } = await runs.start({ experiment: exp });
  const out = await runs.wait(run)!;
  t.equal(out.verdict, 'stopped');
  t.match(out.reason, /STOP at validator \(stage 3 of 4\): found a passport number/);
  t.equal(h.hub.store.queue.get(`${run}:chain:3-auditor`), undefined, 'the auditor was never submitted');
  const rd = path.join(dir, 'runs', run);
  for (const f of ['passport.json', 'spec.json', 'events.jsonl', 'nodes.jsonl', 'result.json', 'report.md', 'report.html']) t.ok(fs.existsSync(path.join(rd, f)), f);
  for (const f of ['input.json', 'prompt.txt', 'output.txt', 'metrics.json']) t.ok(fs.existsSync(path.join(rd, 'nodes', 'chain.2-validator', f)), `validator ${f}`);
  const lines = fs.readFileSync(path.join(rd, 'nodes.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { node: string; prompt: string; output: string; metrics: { state: string } });
  t.same(lines.map((l) => l.node), ['chain/0-scanner', 'chain/1-anonymizer', 'chain/2-validator']);
  t.match(lines[2]!.output, /found a passport number/);
  t.equal(lines[2]!.metrics.state, 'done');
  const html = fs.readFileSync(path.join(rd, 'report.html'), 'utf8');
  t.match(html, /<svg/);
  t.match(html, /stopped/);
  t.notMatch(html, /<script|https?:\/\/(?!www\.w3\.org)/, 'self-contained');
  const events = fs.readFileSync(path.join(rd, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string });
  t.same(events.map((e) => e.type).filter((x) => x !== 'node_submitted'), ['run_started', 'node_done', 'node_done', 'node_done', 'run_done']);
  const passport = JSON.parse(fs.readFileSync(path.join(rd, 'passport.json'), 'utf8')) as { seed: number; host: { hostname: string }; config: { topology: string } };
  t.equal(passport.config.topology, 'strict-chain');
  t.equal(runs.get(run)?.state, 'done');
});

t.test('echo garbage through a real hub gives recorded verdicts, not crashes (pipeline, arena, debate, map-reduce, star)', async (t) => {
  const dir = tmp();
  const h = await startHub({ stateDir: dir });
  const p = startPool(h.addr, 4);
  t.teardown(async () => { await p.stop(); await h.stop(); fs.rmSync(dir, { recursive: true, force: true }); });
  t.ok(await waitWorkers(h.hub, 4));
  const runs = new RunManager(h.hub, { dir: path.join(dir, 'runs'), version: 'test', log: quiet });
  const cases: [unknown, string][] = [
    [{ topology: 'pipeline', inputs: { text: 'x' }, limits: { rounds: 2 } }, 'rejected'],
    [{ topology: 'arena', inputs: { text: 'x' }, roles: { contestant: { agents: 3 }, judge: { agents: 2 } } }, 'no-verdict'],
    [{ topology: 'diamond-debate', inputs: { text: 'x' }, limits: { rounds: 2 } }, 'no-consensus'],
    [{ topology: 'map-reduce', inputs: { text: 'a\nb\nc\nd\ne\n', chunk_chars: 16 }, map_reduce: { fan_in: 2 } }, 'fail'],
    [{ topology: 'star', inputs: { items: ['a', 'b', 'c'] } }, 'done'],
  ];
  for (const [exp, verdict] of cases) {
    const { run } = await runs.start({ experiment: exp });
    const out = await runs.wait(run)!;
    t.equal(out.verdict, verdict, `${(exp as { topology: string }).topology}: ${out.reason}`);
  }
});

t.test('a bad experiment is refused and no run starts', async (t) => {
  const dir = tmp();
  const h = await startHub({ stateDir: dir });
  t.teardown(async () => { await h.stop(); fs.rmSync(dir, { recursive: true, force: true }); });
  const runs = new RunManager(h.hub, { dir: path.join(dir, 'runs'), version: 'test', log: quiet });
  await t.rejects(runs.start({ experiment: 'topology: pipeline\ninputs: {text: x}\nlimits:\n  roundz: 2\n' }), { code: 'SWARM_ERR_CONFIG', message: /experiment:4:3: limits\.roundz: unknown field/ });
  t.same(runs.list(), []);
  t.equal(h.hub.store.queue.counts().queued, 0);
  t.same(h.hub.store.meta, []);
});

t.test('after a hub restart the run resumes from its journaled spec and the stored results', async (t) => {
  const dir = tmp();
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  let h = await startHub({ stateDir: dir });
  let p = startPool(h.addr, 2, { options: { latency_ms: '30' } });
  t.ok(await waitWorkers(h.hub, 2));
  let runs = new RunManager(h.hub, { dir: path.join(dir, 'runs'), version: 'test', log: quiet });
  const items = Array.from({ length: 40 }, (_, i) => `item ${i}`);
  const { run } = await runs.start({ experiment: { topology: 'star', inputs: { items } } });
  while (h.hub.store.queue.counts().done < 6) await new Promise((r) => setTimeout(r, 10));
  await p.stop();
  await h.stop();
  const before = fs.readFileSync(path.join(dir, 'journal.ndjson'), 'utf8').split('\n').filter((l) => l.includes('"t":"result"')).length;
  t.ok(before >= 6 && before < 40, `${before} results journaled before the restart`);

  h = await startHub({ stateDir: dir });
  runs = new RunManager(h.hub, { dir: path.join(dir, 'runs'), version: 'test', log: quiet });
  t.same(await runs.resumeAll(), [run]);
  p = startPool(h.addr, 2);
  t.teardown(async () => { await p.stop(); await h.stop(); });
  const out = await Promise.race([runs.wait(run)!, new Promise<undefined>((r) => { setTimeout(() => r(undefined), 30_000).unref(); })]);
  if (!out) { t.fail(`run not finished 30 s after the restart: ${JSON.stringify(h.hub.store.queue.counts())}`); return; }
  t.equal(out.verdict, 'done');
  t.equal(out.output.split('\n\n').length, 40);
  const results = fs.readFileSync(path.join(dir, 'journal.ndjson'), 'utf8').split('\n').filter((l) => l.includes('"t":"result"'));
  t.equal(results.length, 40, 'each node recorded exactly once across the restart');
  t.same(await runs.resumeAll(), [], 'nothing to resume twice');
});
