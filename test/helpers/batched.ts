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
