import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { findLlamaBinary } from '../../drivers/llama-build/index.js';

import { ROOT, fixtureNodeArgs } from './paths.js';

/** The test model directory: SWARM_TEST_MODELS, default ../shared/models from the repo root. */
export const MODELS = process.env.SWARM_TEST_MODELS ?? path.resolve(ROOT, '../shared/models');
export const STORIES = path.join(MODELS, 'stories260K.gguf');

/**
 * The llama.cpp program and model a test needs, or the reason they are missing. Under CI=true a
 * missing one is a failure (CI runs `swarm engine build` first); otherwise the test is skipped.
 */
export function llamaPrereqs(binary: string): { bin: string; model: string } | { missing: string } {
  const bin = findLlamaBinary(binary);
  if (!bin) return { missing: `${binary} not found (SWARM_LLAMA_BIN_DIR, the build cache, PATH): run \`swarm engine build\`` };
  if (!fs.existsSync(STORIES)) return { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };
  return { bin, model: STORIES };
}

/** Fail under CI, skip otherwise. Returns true when the test should stop. */
export function missingPrereq(t: Test, p: { missing: string } | object): p is { missing: string } {
  if (!('missing' in p)) return false;
  if (process.env.CI === 'true') t.fail(p.missing);
  else t.skip(p.missing, () => {});
  return true;
}


/** True if the pid exists and is not a zombie. */
export function alive(pid: number): boolean {
  try { process.kill(pid, 0); } catch { return false; }
  try { const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8'); return s[s.lastIndexOf(')') + 2] !== 'Z'; } catch { return false; }
}

import { until as untilDefault } from './wait.js';

/** Poll until `cond` holds or `ms` pass (a bound, not a timing assertion); engines get 15 s by default. */
export const until = (cond: () => boolean | Promise<boolean>, ms = 15_000): Promise<boolean> => untilDefault(cond, ms, 50);

/** Drain a chat into one string and its stats. */
export async function collect(g: AsyncGenerator<string, unknown, void>): Promise<{ text: string; stats: unknown; chunks: number }> {
  let text = '';
  let chunks = 0;
  let r = await g.next();
  while (!r.done) { text += r.value; chunks++; r = await g.next(); }
  return { text, stats: r.value, chunks };
}

/** Drain a chat that is expected to fail and return what it threw (undefined if it ended cleanly). */
export async function drainError(g: AsyncGenerator<string, unknown, void>): Promise<unknown> {
  try { for await (const _ of g) { /* drain */ } } catch (e) { return e; }
  return undefined;
}

/**
 * Start test/fixtures/llama-engine-owner.ts for `kind`, SIGKILL it once its engine runs and report
 * whether the engine process outlived it (it must not: the engine watches its owner).
 */
export async function engineOutlivesOwner(kind: string, model: string): Promise<{ running: boolean; orphaned: boolean }> {
  const child = spawn(process.execPath, [...fixtureNodeArgs('llama-engine-owner.ts'), kind, model], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (c: Buffer) => { buf += c.toString(); const i = buf.indexOf('\n'); if (i >= 0) resolve(buf.slice(0, i)); });
    child.once('exit', (code) => reject(new Error(`fixture exited ${code}`)));
  });
  const pid = (JSON.parse(line) as { pids: number[] }).pids[0]!;
  const running = alive(pid);
  child.kill('SIGKILL');
  // The engine leads its process group: its orphan watchdog is in it too and must be gone as well.
  return { running, orphaned: !(await until(() => !alive(pid) && groupMembers(pid).length === 0)) };
}

/** Live (not zombie) processes in process group `pgid`. */
export function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      if (f[0] !== 'Z' && Number(f[2]) === pgid) out.push(Number(d));
    } catch { /* gone meanwhile */ }
  }
  return out;
}
