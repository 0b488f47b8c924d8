/**
 * The results archive's disk use over a run that rotates it many times, with `--archive-max` and
 * without (`off`), side by side in one process: N tasks run through a journaled TaskStore (prompt as
 * submitted, the result its echo, the count horizon small so nearly every task is archived), the
 * archive's bytes on disk sampled at every tenth of the run. With the bound the samples stay flat at
 * or under it; without it they grow with the tasks. Also the tasks per second of each (the bound's
 * cost: one unlink per rotation). A first run, unreported, warms the process up; then bounded, off,
 * off, bounded.
 *
 * Run: `npm run build && node dist/bench/archive-disk.js [--tasks 100000] [--max 4MiB] [--prompt 400]`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { arg, checkArgs } from './args.js';
import { TaskStore } from '../hub/store.js';
import { archiveDir, archiveFiles } from '../hub/archive.js';
import { parseArchiveMax, rotateBytesFor, type ArchiveBound } from '../hub/archive-bound.js';

const TASKS = Number(arg('tasks', '100000', 'tasks run through the store, per side'));
const MAX = parseArchiveMax(arg('max', '4MiB', 'the --archive-max of the bounded side'));
const PROMPT = Number(arg('prompt', '400', 'prompt characters (the result is 6 more)'));
checkArgs('archive-disk', 'The results archive on disk over a run that rotates it many times, bounded by --archive-max and not.');

const q = { maxDepth: 10_000_000, leaseMs: 600_000, defaultMaxAttempts: 3 };
const disk = (dir: string) => archiveFiles(archiveDir(dir)).reduce((n, [, f]) => n + fs.statSync(f).size, 0);

async function side(bound: ArchiveBound): Promise<Record<string, unknown>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-archive-disk-'));
  try {
    // The unbounded side rotates at the bounded side's file size: the same number of rotations.
    const s = await TaskStore.open(dir, q, { fsyncMs: 0 }, { retain: { ageMs: 3600_000, count: 1000 }, evictEveryMs: 3600_000, archiveRotateBytes: rotateBytesFor(MAX), archiveMax: bound });
    const w = { id: 'w-1', caps: [] as string[] };
    const samples: number[] = [];
    const t0 = performance.now();
    for (let from = 0, next = TASKS / 10; from < TASKS; from += 500) {
      await s.submitMany(Array.from({ length: 500 }, (_, i) => ({ id: `t${from + i}`, prompt: 'p'.repeat(PROMPT) })));
      for (let rec = s.lease(w); rec; rec = s.lease(w)) await s.complete(rec.id, { text: `echo: ${rec.spec.prompt}`, worker: w.id, attempt: 1 });
      await s.evict();
      if (from + 500 >= next) { samples.push(disk(dir)); next += TASKS / 10; }
    }
    const secs = (performance.now() - t0) / 1000;
    const a = s.retention.archive!;
    const out = { archive_max: bound.bytes || 'off', rotate_bytes: rotateBytesFor(MAX), tasks: TASKS, archived: s.retention.evicted, files_written: a.oldest_file + a.files - 1, files_kept: a.files, pruned_files: a.pruned_files, disk_mib_each_tenth: samples.map((b) => +(b / 2 ** 20).toFixed(2)), tasks_per_s: Math.round(TASKS / secs) };
    await s.close();
    return out;
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
}

const load = os.loadavg()[0]!.toFixed(1);
const OFF = { bytes: 0, ageMs: 0 };
// Unreported first (the process's first run is slower: the JIT), then ABBA, so order favours neither.
await side(MAX);
for (const bound of [MAX, OFF, OFF, MAX]) {
  process.stdout.write(`${JSON.stringify({ bench: 'archive-disk', ...(await side(bound)), prompt: PROMPT, load_before: load, load_after: os.loadavg()[0]!.toFixed(1), at: new Date().toISOString() })}\n`);
}
