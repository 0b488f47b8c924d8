import { spawn } from 'node:child_process';
import type { ScoreResult } from './pure.js';

/**
 * An exec scorer: runs `command` in `cwd`, writes `{"answer", "item"}` as JSON on its stdin, and reads
 * a score in [0, 1] from the last line of its stdout. A failing, slow or out-of-range scorer gives
 * score 0 with the reason (an item is never silently dropped).
 */
export function scoreExec(command: string[], answer: string, item: unknown, o: { cwd?: string; timeout_ms: number }): Promise<ScoreResult> {
  return new Promise((resolve) => {
    let out = '', err = '', settled = false;
    const done = (r: ScoreResult): void => { if (!settled) { settled = true; clearTimeout(timer); resolve(r); } };
    const c = spawn(command[0]!, command.slice(1), { cwd: o.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    const timer = setTimeout(() => { c.kill('SIGKILL'); done({ score: 0, error: `scorer timed out after ${o.timeout_ms} ms` }); }, o.timeout_ms);
    c.stdout.on('data', (d: Buffer) => { if (out.length < 65536) out += d.toString(); });
    c.stderr.on('data', (d: Buffer) => { if (err.length < 4096) err += d.toString(); });
    c.on('error', (e) => done({ score: 0, error: `scorer did not start: ${e.message}` }));
    c.stdin.on('error', () => { /* a scorer that ignores its stdin */ });
    c.on('close', (code) => {
      if (code !== 0) { done({ score: 0, error: `scorer exited with ${code}${err ? `: ${err.trim().slice(0, 200)}` : ''}` }); return; }
      const last = out.trim().split('\n').at(-1)?.trim() ?? '';
      const n = Number(last);
      if (last === '' || !Number.isFinite(n) || n < 0 || n > 1) { done({ score: 0, error: `scorer printed ${JSON.stringify(last.slice(0, 40))}, not a score in [0, 1]` }); return; }
      done({ score: n, extracted: last });
    });
    c.stdin.end(JSON.stringify({ answer, item }));
  });
}
