import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { swarm, swarmBg, tempDir, until } from '../helpers/cli.js';

type SweepJson = { cells: { key: string; run?: string; state: string; hash?: string }[] };

// The simulated driver with a latency per answer: a cell runs long enough to be interrupted mid-way.
t.test('swarm sweep: SIGTERM stops it (no further cell), an orphan is restarted, a changed experiment re-runs its cells', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  t.equal(swarm(['dataset', 'make', 'arithmetic', '--n', '4', '--seed', '2', '--out', path.join(dir, 'items.jsonl')]).code, 0);
  fs.writeFileSync(path.join(dir, 'exp.yaml'), [
    'name: cells', 'topology: star', 'seed: 1', 'inputs: {dataset: items.jsonl, concurrency: 1, limit: 2}',
    'baselines: [single]', 'scorer: {type: exact, extract: last_number}', '',
  ].join('\n'));
  const args = (extra: string[] = []) => ['sweep', path.join(dir, 'exp.yaml'), '--seeds', '2', '--driver', 'simulated', '--driver-opt', 'p=0.6',
    '--driver-opt', 'latency_ms=1500', '--agents', '2', '--state-dir', state, '--json', ...extra];
  const sweepJson = () => { try { return JSON.parse(fs.readFileSync(path.join(state, 'sweeps', 'cells', 'sweep.json'), 'utf8')) as SweepJson; } catch { return undefined; } };
  const runs = () => (fs.existsSync(path.join(state, 'runs')) ? fs.readdirSync(path.join(state, 'runs')) : []);
  const verdict = (run: string) => (JSON.parse(fs.readFileSync(path.join(state, 'runs', run, 'result.json'), 'utf8')) as { verdict: string }).verdict;
  const exited = (c: ReturnType<typeof swarmBg>['child']) => new Promise<number | null>((r) => { if (c.exitCode !== null) r(c.exitCode); else c.once('exit', (code) => r(code)); });

  // 1. SIGTERM mid-cell: exit 130, the cell's run cancelled, no second cell started.
  const a = swarmBg(args());
  await until(() => sweepJson()?.cells.some((c) => c.state === 'running') ?? false, 120_000);
  a.child.kill('SIGTERM');
  t.equal(await exited(a.child), 130, a.output());
  t.equal(runs().length, 1, 'no further cell started');
  await until(() => fs.existsSync(path.join(state, 'runs', runs()[0]!, 'result.json')), 30_000);
  t.equal(verdict(runs()[0]!), 'cancelled', 'the running cell was cancelled');
  t.ok(sweepJson()!.cells.every((c) => c.state === 'pending'), 'both cells still to run');

  // 2. kill -9 mid-cell leaves an orphaned run; the next sweep cancels it and runs the cell again.
  const b = swarmBg(args());
  await until(() => sweepJson()?.cells.some((c) => c.state === 'running' && c.run) ?? false, 120_000);
  const orphan = sweepJson()!.cells.find((c) => c.state === 'running')!.run!;
  process.kill(-b.child.pid!, 'SIGKILL');
  await exited(b.child);
  const c = swarm(args(), { timeoutMs: 240_000 });
  t.equal(c.code, 0, c.stderr);
  t.match(JSON.parse(c.stdout), { cells: 2, ran: 2, reused: 0 });
  t.not(sweepJson()!.cells[0]!.run, orphan, 'the orphan was not waited for: the cell ran again');
  await until(() => fs.existsSync(path.join(state, 'runs', orphan, 'result.json')), 30_000);
  t.equal(verdict(orphan), 'cancelled', 'the orphaned run was cancelled');

  // 3. The same command reuses both cells; a changed experiment (limit) runs them again.
  t.match(JSON.parse(swarm(args(), { timeoutMs: 120_000 }).stdout), { cells: 2, ran: 0, reused: 2 });
  const before = sweepJson()!.cells.map((x) => x.hash);
  const d = swarm(args(['--set', 'inputs.limit=1']), { timeoutMs: 240_000 });
  t.equal(d.code, 0, d.stderr);
  t.match(JSON.parse(d.stdout), { cells: 2, ran: 2, reused: 0 }, 'a cell keyed by its resolved experiment: --set inputs.limit=1 re-runs it');
  t.ok(sweepJson()!.cells.every((x, i) => x.hash && x.hash !== before[i]));

  // 4. Driver options that differ from the running swarm are refused, not silently ignored.
  const e = swarm(['sweep', path.join(dir, 'exp.yaml'), '--driver', 'simulated', '--driver-opt', 'p=0.95', '--driver-opt', 'latency_ms=1500', '--state-dir', state]);
  t.equal(e.code, 2, e.stderr);
  t.match(e.stderr, /--driver-opt p=0\.95 \(it runs p=0\.6\)/);
});
