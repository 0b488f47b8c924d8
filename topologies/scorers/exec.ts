import { describeEnd, runCommand } from '../../drivers/run-command.js';
import type { ScoreResult } from './pure.js';

/**
 * An exec scorer: runs `command` in `cwd`, writes `{"answer", "item"}` as JSON on its stdin, and reads
 * a score in [0, 1] from the last line of its stdout. A failing, slow or out-of-range scorer gives
 * score 0 with the reason (an item is never silently dropped).
 */
export async function scoreExec(command: string[], answer: string, item: unknown, o: { cwd?: string; timeout_ms: number }): Promise<ScoreResult> {
  // In a process group of its own, so a timeout takes what it started too. A score is one
  // short line: a scorer that prints past 1 MiB is stopped and scores 0 with the reason.
  const r = await runCommand(command[0]!, command.slice(1), { cwd: o.cwd, input: JSON.stringify({ answer, item }), timeoutMs: o.timeout_ms, killGraceMs: 0, maxBuffer: 1024 * 1024 });
  if (r.error) return { score: 0, error: `scorer did not start: ${r.error.message}` };
  if (r.timedOut) return { score: 0, error: `scorer timed out after ${o.timeout_ms} ms` };
  if (r.exitCode !== 0) {
    const err = r.stderr.trim();
    return { score: 0, error: `scorer ${r.signal || r.overflow ? describeEnd(r) : `exited with ${r.exitCode}`}${err ? `: ${err.slice(0, 200)}` : ''}` };
  }
  const last = r.stdout.trim().split('\n').at(-1)?.trim() ?? '';
  const n = Number(last);
  if (last === '' || !Number.isFinite(n) || n < 0 || n > 1) return { score: 0, error: `scorer printed ${JSON.stringify(last.slice(0, 40))}, not a score in [0, 1]` };
  return { score: n, extracted: last };
}
