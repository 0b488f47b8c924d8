import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { CLI, api, hubFile, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';

/**
 * `swarm submit --file` read the whole file into memory (a file near 1 GB failed). It reads line by
 * line and sends each slice (5,000 tasks or 16 MiB) as it fills. A malformed line past the first
 * slice names its line and says which lines were accepted; a re-run of the fixed file (tasks with
 * ids) submits nothing twice.
 */

interface Status { tasks: { queued: number; leased: number; done: number; failed: number } }

function submit(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [CLI, 'submit', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    c.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
    c.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
    c.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

t.test('a 20 MB task file goes in slices; a bad line after the first slice is named, the slices before it stay accepted', async (t) => {
  const base = tempDir(t);
  const state = path.join(base, 'state');
  // A hub without workers: what is accepted stays queued, to be counted.
  const hub = swarmBg(['hub', '--state-dir', state]);
  t.teardown(() => { try { process.kill(-hub.child.pid!, 'SIGKILL'); } catch { /* gone */ } swarm(['down', '--state-dir', state]); });
  t.ok(await until(() => hubFile(state)?.pid === hub.child.pid, 60_000), 'hub up');
  const N = 200;
  const pad = 'p'.repeat(100_000);
  const lines = Array.from({ length: N }, (_, i) => JSON.stringify({ id: `s-${i}`, prompt: `${i} ${pad}` }));
  // Line 181 is malformed: past the first slice (16 MiB: about 167 of these tasks).
  const bad = path.join(base, 'bad.jsonl');
  fs.writeFileSync(bad, [...lines.slice(0, 180), '{"id":"s-180","prompt":', ...lines.slice(181)].join('\n') + '\n');
  const r1 = await submit(['--file', bad, '--state-dir', state]);
  t.not(r1.code, 0, 'the malformed line fails the submit');
  t.match(r1.stderr, /SWARM_ERR_BAD_JSON/, 'with the JSON error code');
  t.match(r1.stderr, new RegExp(`${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:181:`), 'naming the line');
  const m = /lines 1-(\d+) of .* \((\d+) task\(s\) in (\d+) upload\(s\)\) were accepted/.exec(r1.stderr);
  t.ok(m, `it says which lines were accepted (${r1.stderr.trim().split('\n').slice(0, 3).join(' | ')})`);
  const acceptedTasks = Number(m?.[2] ?? -1);
  t.ok(acceptedTasks > 0 && acceptedTasks < 181, 'the first slice, not the one the bad line is in');
  const printed = r1.stdout.trim().split('\n').filter(Boolean);
  t.equal(printed.length, acceptedTasks, 'the accepted ids were printed');
  t.equal((await api<Status>(state, 'GET', '/status')).tasks.queued, acceptedTasks, 'the hub holds exactly those');

  // The fixed file, run again whole: the accepted tasks come back as duplicates, the rest go in once.
  const good = path.join(base, 'good.jsonl');
  fs.writeFileSync(good, lines.join('\n') + '\n');
  t.ok(fs.statSync(good).size > 16 * 1024 * 1024, 'bigger than one slice');
  const r2 = await submit(['--file', good, '--state-dir', state]);
  t.equal(r2.code, 0, r2.stderr);
  const out = r2.stdout.trim().split('\n');
  t.equal(out.length, N, 'every task acknowledged');
  t.equal(out.filter((l) => l.endsWith('(duplicate: already submitted)')).length, acceptedTasks, 'the ones accepted before are duplicates');
  t.match(r2.stderr, new RegExp(`submitted ${N} task\\(s\\) in 2 upload\\(s\\)`), 'progress on stderr for an upload of several slices');
  t.equal((await api<Status>(state, 'GET', '/status')).tasks.queued, N, 'each task once');
});
