import fs from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { BatchedDriver } from '../../drivers/batched/index.js';

/**
 * `n` batched agents on one engine of `model` in `dir` (agent i on sequence i), one thread, started in
 * turn; stopped with the test, and the engine killed should it outlive them.
 */
export async function batchedAgents(t: Test, model: string, dir: string, n: number, extra: Record<string, string> = {}): Promise<BatchedDriver[]> {
  const ds = Array.from({ length: n }, () => new BatchedDriver({ name: 'batched', model, options: { dir, threads: '1', idle_ms: '500', sequences: String(n), ...extra } }));
  t.teardown(async () => {
    const pid = ds[0]?.enginePid();
    await Promise.all(ds.map((d) => d.stop()));
    if (pid) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  });
  for (const d of ds) await d.start();
  return ds;
}

/** The batched engines' log lines from the state dir `dir`. */
export function engineLog(dir: string): string {
  const logs = path.join(dir, 'engines');
  return fs.readdirSync(logs).filter((f) => f.endsWith('.log')).map((f) => fs.readFileSync(path.join(logs, f), 'utf8')).join('\n');
}
