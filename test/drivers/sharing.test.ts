/**
 * Sharing one GGUF between engine processes, proven from /proc/PID/smaps: four llama-server engines
 * on one model map the same file, so each one's proportional share (PSS) of the mapping is a fraction
 * of its resident size (RSS). For Q4_K weights llama.cpp on x86 repacks them by default into a
 * private per-process buffer, which defeats sharing; `--no-repack` keeps them in the shared mapping.
 * (The speed cost of --no-repack is measured in bench/repack.ts, not here.)
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { LlamaServerDriver } from '../../drivers/llama-server/index.js';
import { findLlamaBinary } from '../../drivers/llama-build/index.js';
import { fileMapping, mb, processMemory, type FileMapping, type ProcessMemory } from '../../bench/smaps.js';
import { MODELS, collect, llamaPrereqs, missingPrereq } from '../helpers/llama.js';
import { ROOT } from '../helpers/paths.js';

const Q8 = path.join(MODELS, 'synth-llama-15M-shape-q8_0.gguf');
// The shared tools sit beside the test models (../shared/{models,tools}); SWARM_TOOLS overrides.
const SYNTH = path.join(process.env.SWARM_TOOLS ?? path.resolve(MODELS, '../tools'), 'make-synth-model');
const ENGINES = 4;

interface Sample { pid: number; map: FileMapping; proc: ProcessMemory }

/** Start `n` llama-server engines on `model` (one slot, one thread each), generate a little on each, read their smaps. */
async function sharedMapping(t: Test, model: string, n: number, args = ''): Promise<Sample[]> {
  const engines = Array.from({ length: n }, () => new LlamaServerDriver({
    name: 'llama-server', model, options: { slots: '1', threads: '1', ctx: '256', ...(args ? { args } : {}) },
  }));
  try {
    for (const e of engines) await e.start();
    // Generation touches every weight, so all of them are resident when we look.
    for (const e of engines) {
      const r = await collect(e.chat('Once upon a time', { maxTokens: 4, seed: 1 }));
      t.ok((r.stats as { tokensOut?: number }).tokensOut! > 0, 'the engine generates');
    }
    return engines.map((e) => {
      const pid = e.pids()[0]!;
      return { pid, map: fileMapping(pid, model), proc: processMemory(pid) };
    });
  } finally {
    await Promise.all(engines.map((e) => e.stop()));
  }
}

function describe(label: string, s: Sample[]): string {
  return s.map((x, i) => `${label} engine ${i}: model mapping RSS ${mb(x.map.rss)} MB, PSS ${mb(x.map.pss)} MB ` +
    `(PSS/RSS ${(x.map.pss / Math.max(1, x.map.rss)).toFixed(2)}); process RSS ${mb(x.proc.rss)} MB, PSS ${mb(x.proc.pss)} MB, anonymous ${mb(x.proc.anonymous)} MB`).join('\n');
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

t.test(`${ENGINES} engines on one Q8_0 GGUF share its pages`, async (t) => {
  const p = llamaPrereqs('llama-server');
  if (missingPrereq(t, p)) return;
  if (missingPrereq(t, fs.existsSync(Q8) ? {} : { missing: `test model ${Q8} not found (set SWARM_TEST_MODELS)` })) return;
  const size = fs.statSync(Q8).size;
  const s = await sharedMapping(t, Q8, ENGINES);
  t.comment(describe('Q8_0', s));
  for (const [i, x] of s.entries()) {
    t.ok(x.map.rss >= 0.5 * size, `engine ${i}: the weights are resident through the file mapping (${mb(x.map.rss)} of ${mb(size)} MB)`);
    t.ok(x.map.pss < 0.5 * x.map.rss, `engine ${i}: mapping PSS ${mb(x.map.pss)} MB is well under its RSS ${mb(x.map.rss)} MB`);
  }
  const total = s.reduce((a, x) => a + x.map.pss, 0);
  t.ok(total < 1.25 * Math.max(...s.map((x) => x.map.rss)), `the model is counted about once over all engines (sum of PSS ${mb(total)} MB)`);
});

t.test('Q4_K: repacking makes the weights private per process; --no-repack keeps them shared', async (t) => {
  const p = llamaPrereqs('llama-server');
  if (missingPrereq(t, p)) return;
  const quantize = findLlamaBinary('llama-quantize');
  if (missingPrereq(t, quantize ? {} : { missing: 'llama-quantize not found: run `swarm engine build`' })) return;
  if (missingPrereq(t, fs.existsSync(SYNTH) ? {} : { missing: `${SYNTH} not found` })) return;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-q4k-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The 110M shape: every matrix dimension is a multiple of 256, so the layers really are Q4_K.
  const f32 = path.join(dir, 'm110-f32.gguf');
  const q4 = path.join(dir, 'm110-q4_k_m.gguf');
  const made = spawnSync(SYNTH, [f32, '768', '12', '12', '2048', 'f32'], { cwd: ROOT, encoding: 'utf8' });
  t.equal(made.status, 0, `make-synth-model: ${made.stderr.slice(-300)}`);
  const qz = spawnSync(quantize!, [f32, q4, 'Q4_K_M', '2'], { encoding: 'utf8' });
  t.equal(qz.status, 0, `llama-quantize: ${qz.stderr.slice(-300)}`);
  fs.rmSync(f32);
  const size = fs.statSync(q4).size;

  const repacked = await sharedMapping(t, q4, ENGINES);
  t.comment(describe('Q4_K_M default', repacked));
  const plain = await sharedMapping(t, q4, ENGINES, '--no-repack');
  t.comment(describe('Q4_K_M --no-repack', plain));

  // --no-repack: the weights stay in the file mapping, and its pages are shared.
  for (const [i, x] of plain.entries()) {
    t.ok(x.map.rss >= 0.9 * size, `--no-repack engine ${i}: the weights are resident through the mapping (${mb(x.map.rss)} of ${mb(size)} MB)`);
    t.ok(x.map.pss < 0.5 * x.map.rss, `--no-repack engine ${i}: mapping PSS ${mb(x.map.pss)} MB is well under its RSS ${mb(x.map.rss)} MB`);
  }
  // Default: llama.cpp copies the Q4_K matrices into a repacked buffer of private anonymous memory in
  // every engine. (The mapping stays resident and shared either way: its pages were read to repack.)
  const extraAnon = mean(repacked.map((x) => x.proc.anonymous)) - mean(plain.map((x) => x.proc.anonymous));
  t.comment(`default vs --no-repack: ${mb(extraAnon)} MB more private anonymous memory in each engine`);
  t.ok(extraAnon >= 0.3 * size, `repacking puts a private copy of the weights in every engine (${mb(extraAnon)} MB each, ${mb(size)} MB file)`);
  for (const [i, x] of repacked.entries()) {
    t.ok(x.proc.anonymous - plain[i]!.proc.anonymous >= 0.8 * extraAnon, `default engine ${i} holds its own repacked copy`);
  }
  const pssDefault = repacked.reduce((a, x) => a + x.proc.pss, 0);
  const pssPlain = plain.reduce((a, x) => a + x.proc.pss, 0);
  t.comment(`total PSS of ${ENGINES} engines: default ${mb(pssDefault)} MB, --no-repack ${mb(pssPlain)} MB`);
  t.ok(pssDefault - pssPlain >= ENGINES * 0.8 * extraAnon, 'so by default the repacked weights are counted once per engine, not once per host');
});
