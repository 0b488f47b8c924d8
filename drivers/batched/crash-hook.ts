import fs from 'node:fs';
import path from 'node:path';

/** The steps of an engine's life at which a test may have it die. */
export type CrashStep = 'load' | 'listen' | 'greet' | 'chat';

/**
 * Test hook: die with SIGKILL at a step of the engine's start or work, as a crash or an OOM kill
 * would (env SWARM_TEST_ENGINE_CRASH=`step,step,...@dir`). The steps fire in the order listed, each
 * once: the first engine to reach the next one creates `dir/crashed-N-STEP` and dies. So
 * `chat,load,listen@dir` lets the first engine start and kills it mid-generation, kills the one
 * started after it before it listens, the third at its first connection, and lets the fourth work.
 * `load`: before the model loads; `listen`: a connection accepted, not yet given a sequence;
 * `greet`: a sequence given; `chat`: the first text of a chat generated.
 */
export function crashPoint(step: CrashStep): void {
  const spec = process.env.SWARM_TEST_ENGINE_CRASH;
  if (!spec) return;
  const at = spec.lastIndexOf('@');
  if (at < 0) return;
  const dir = spec.slice(at + 1);
  const steps = spec.slice(0, at).split(',');
  const next = steps.findIndex((s, i) => !fs.existsSync(path.join(dir, `crashed-${i}-${s}`)));
  if (next < 0 || steps[next] !== step) return;
  try { fs.closeSync(fs.openSync(path.join(dir, `crashed-${next}-${step}`), 'wx')); } catch { return; }
  process.kill(process.pid, 'SIGKILL');
}
