import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { hubFile, swarm, tempDir, until } from '../helpers/cli.js';
import { Checker, type FinalTask } from '../helpers/checker.js';

/**
 * One state file of a running swarm is removed while the directory stays (an operator clearing old
 * results, or the journal by mistake): tasks accepted and finished afterwards must not vanish with an
 * unlinked file. Real `swarm up` processes, echo driver, every task counted.
 */

const tasks = (prefix: string, n: number): string => Array.from({ length: n }, (_, i) => JSON.stringify({ id: `${prefix}${i}`, prompt: `${prefix} ${i}` })).join('\n') + '\n';

function submit(state: string, file: string, check: Checker): void {
  const r = swarm(['submit', '--file', file, '--wait', '--json', '--state-dir', state]);
  if (r.code !== 0) throw new Error(`submit: exit ${r.code}: ${r.stderr}`);
  const out = JSON.parse(r.stdout) as { tasks: FinalTask[] };
  check.acceptedIds(out.tasks.map((x) => x.id));
  for (const x of out.tasks) if (x.state === 'done') check.sawDone(x.id, x.text!);
}

const archived = (state: string): FinalTask[] => {
  const r = swarm(['results', '--json', '--state-dir', state]);
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { id: string; state: string; result?: { text: string } })
    .map((a) => ({ id: a.id, state: a.state, text: a.result?.text }));
};

t.test('the results archive removed under a running swarm (its live file, then the whole folder): what finishes later is archived, none lost', async (t) => {
  const base = tempDir(t);
  const state = path.join(base, 'state');
  const up = swarm(['up', '--state-dir', state, '--driver', 'echo', '--agents', '2', '--retain', '1s,1', '-d']);
  t.equal(up.code, 0, up.stderr);
  for (const [prefix, remove] of [['a', undefined], ['b', 'results/results-000001.ndjson'], ['c', 'results']] as const) {
    // What the earlier round archived is in the file about to go: only this round's tasks are counted.
    if (remove) fs.rmSync(path.join(state, remove), { recursive: true, force: true });
    const file = path.join(base, `${prefix}.jsonl`);
    fs.writeFileSync(file, tasks(prefix, 8));
    const round = new Checker();
    submit(state, file, round);
    // The horizon is 1 s and one task: every one of them leaves the hot state for the archive.
    t.ok(await until(() => archived(state).filter((a) => a.id.startsWith(prefix)).length >= 8, 30_000, 250), `round ${prefix}: archived`);
    const v = round.check(archived(state).filter((a) => a.id.startsWith(prefix)), { expect: (id) => `echo: ${prefix} ${id.slice(1)}`, mustFinish: true });
    t.same(v, { lost: 0, duplicated: 0, changed: 0, unexpected: 0, details: [] }, `round ${prefix}${remove ? ` after removing ${remove}` : ''}: 0 lost/dup/changed`);
  }
  t.ok(hubFile(state), 'the hub is still up');
});

t.test('the journal removed under a running swarm: tasks acknowledged afterwards survive a kill -9 of the hub', async (t) => {
  const base = tempDir(t);
  const state = path.join(base, 'state');
  const up = swarm(['up', '--state-dir', state, '--driver', 'echo', '--agents', '2', '--no-failover', '-d']);
  t.equal(up.code, 0, up.stderr);
  fs.rmSync(path.join(state, 'journal.ndjson'));
  const file = path.join(base, 'b.jsonl');
  fs.writeFileSync(file, tasks('b', 8));
  const check = new Checker();
  submit(state, file, check);
  process.kill(hubFile(state)!.pid, 'SIGKILL');
  t.ok(await until(() => { try { process.kill(hubFile(state)!.pid, 0); return false; } catch { return true; } }, 10_000), 'hub killed');
  const again = swarm(['up', '--state-dir', state, '--driver', 'echo', '--agents', '2', '--no-failover', '-d']);
  t.equal(again.code, 0, again.stderr);
  const w = swarm(['submit', '--file', file, '--json', '--state-dir', state]);
  const out = JSON.parse(w.stdout) as { accepted: { id: string; duplicate: boolean }[] };
  // A resubmit of a known id answers duplicate; after the loss each one is new work.
  const known = out.accepted.filter((x) => x.duplicate).length;
  t.equal(known, 8, `${known}/8 acknowledged tasks were still known after the restart`);
});

t.test('the journal cut short under a running swarm (to nothing, then mid-line): every task acknowledged before and after survives a kill -9 of the hub', async (t) => {
  const base = tempDir(t);
  const state = path.join(base, 'state');
  const up = swarm(['up', '--state-dir', state, '--driver', 'echo', '--agents', '2', '--no-failover', '-d']);
  t.equal(up.code, 0, up.stderr);
  const journal = path.join(state, 'journal.ndjson');
  const files: string[] = [];
  for (const [prefix, cut] of [['a', undefined], ['b', () => 0], ['c', () => Math.floor(fs.statSync(journal).size / 2)]] as const) {
    if (cut) fs.truncateSync(journal, cut());
    const file = path.join(base, `${prefix}.jsonl`);
    fs.writeFileSync(file, tasks(prefix, 8));
    files.push(file);
    submit(state, file, new Checker());
  }
  process.kill(hubFile(state)!.pid, 'SIGKILL');
  t.ok(await until(() => { try { process.kill(hubFile(state)!.pid, 0); return false; } catch { return true; } }, 10_000), 'hub killed');
  const again = swarm(['up', '--state-dir', state, '--driver', 'echo', '--agents', '2', '--no-failover', '-d']);
  t.equal(again.code, 0, again.stderr);
  let known = 0;
  for (const file of files) {
    const w = swarm(['submit', '--file', file, '--json', '--state-dir', state]);
    known += (JSON.parse(w.stdout) as { accepted: { duplicate: boolean }[] }).accepted.filter((x) => x.duplicate).length;
  }
  t.equal(known, 24, `${known}/24 acknowledged tasks were still known after the restart`);
});
