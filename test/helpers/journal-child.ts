import fs from 'node:fs';
import { spawn } from 'node:child_process';
import type { TaskStore } from '../../hub/index.js';
import { archiveDir, archiveFiles } from '../../hub/archive.js';
import type { Checker, FinalTask } from './checker.js';
import { fixtureFile } from './paths.js';

/** A store's tasks as the checker reads them. */
export const storeState = (s: TaskStore): FinalTask[] => [...s.queue.all()].map((r) => ({ id: r.id, state: r.state, text: r.result?.text }));

/**
 * Run test/fixtures/journal-crash-child.mjs (the real store, writing tasks and results) until it
 * dies; what it printed. `more`: its further arguments (first task number, retention count, the
 * wait before its first retention pass); `killAfterMs`: SIGKILL it that long after its first acknowledgement.
 */
export function runJournalChild(dir: string, step: string, total: number | 'forever', more: string[] = [], killAfterMs?: number): Promise<{ signal: NodeJS.Signals | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [fixtureFile('journal-crash-child.mjs'), dir, step, String(total), ...more], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    let armed = false;
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (killAfterMs === undefined || armed || !out.includes('\nacc ')) return;
      armed = true;
      setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    });
    child.on('close', (_code, signal) => resolve({ signal, out }));
  });
}

/** Feed a fixture's output to the checker; the task numbers it used (`t-N`). */
export function toldByChild(check: Checker, out: string): number[] {
  const nums: number[] = [];
  for (const line of out.split('\n')) {
    const [kind, ...ids] = line.split(' ');
    if (kind === 'try') check.pendingIds(ids);
    if (kind === 'acc') { check.acceptedIds(ids); for (const id of ids) nums.push(Number(/^t-(\d+)/.exec(id)?.[1])); }
    if (kind === 'done') check.sawDone(ids[0]!, `r ${ids[0]}`);
  }
  return nums;
}

/**
 * Every task of a store's state directory, hot or archived, and how many result records each has
 * (a hot result counts one, each archive line one more): what the checker's `resultRecords` takes.
 */
export function hotAndArchived(dir: string, s: TaskStore): { final: FinalTask[]; records: Map<string, number> } {
  const final: FinalTask[] = storeState(s);
  const records = new Map<string, number>();
  for (const f of final) if (f.state === 'done') records.set(f.id, 1);
  for (const [, file] of archiveFiles(archiveDir(dir))) {
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (!line) continue;
      const a = JSON.parse(line) as { id: string; state: string; result?: { text: string } };
      records.set(a.id, (records.get(a.id) ?? 0) + 1);
      final.push({ id: a.id, state: a.state, text: a.result?.text });
    }
  }
  return { final, records };
}
