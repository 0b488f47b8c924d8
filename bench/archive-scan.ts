/**
 * What reading one unrecorded archive batch back costs (hub/archive-evict.ts `settle`: the lines past
 * the journal's covered end, read at open and at a pass after the journal refused their evict
 * record): a batch of `--lines` tasks with prompts and results of `--bytes` each, appended as the
 * evictor does, then read from its start `--runs` times (synchronous: the event loop is held as long).
 * Run: `npm run build && node dist/bench/archive-scan.js [--lines 5000] [--bytes 200,3200]`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ResultsArchive, toArchived } from '../hub/archive.js';
import { readArchiveAfter } from '../hub/archive-read.js';
import { arg, checkArgs } from './args.js';

const LINES = Number(arg('lines', '5000', 'tasks in the batch (the evictor writes 5,000 at most)'));
const BYTES = arg('bytes', '200,3200', 'prompt and result length of each task, one run per value');
const RUNS = Number(arg('runs', '7', 'reads per size (the median is printed)'));
checkArgs('archive-scan', 'How long reading an unrecorded archive batch back holds the event loop.');

async function main(): Promise<void> {
  for (const size of BYTES.split(',').map(Number)) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-scan-'));
    try {
      const a = ResultsArchive.open(dir);
      const now = Date.now();
      const recs = Array.from({ length: LINES }, (_, i) => toArchived({
        id: `t${i}`, spec: { id: `t${i}`, prompt: 'p'.repeat(size), priority: 0 }, state: 'done', attempts: 1,
        submittedAt: now, finishedAt: now, seq: i, result: { text: 'r'.repeat(size), worker: 'w', attempt: 1 },
      }, now));
      const { end } = await a.append(recs);
      a.close();
      const ms: number[] = [];
      for (let k = 0; k < RUNS; k++) {
        let n = 0;
        const t0 = performance.now();
        readArchiveAfter(path.join(dir, 'results'), { file: 1, end: 0 }, () => n++);
        ms.push(performance.now() - t0);
        if (n !== LINES) throw new Error(`read ${n} of ${LINES} lines`);
      }
      ms.sort((x, y) => x - y);
      console.log(`${LINES} lines of ${size} B texts, ${(end / 2 ** 20).toFixed(1)} MiB: read back in ${ms[RUNS >> 1]!.toFixed(1)} ms (median of ${RUNS}; ${ms[0]!.toFixed(1)}-${ms[RUNS - 1]!.toFixed(1)}), load ${os.loadavg()[0]!.toFixed(1)}`);
    } finally { fs.rmSync(dir, { recursive: true, force: true }); }
  }
}

await main();
