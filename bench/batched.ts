/**
 * The batched engine's own benches, one run each, results appended to bench/results/batched.jsonl
 * with the load average beside them:
 *   prefix  MODEL   8 agents on one engine, prompts sharing a ~1,500-token prefix and differing in
 *                   the last ~20 tokens: time to first token cold (first prompt) vs warm (second).
 *   share   MODEL   8 agents, one evaluates a ~1,500-token document with its question, then the other 7
 *                   ask theirs about it, each on its own sequence: time to first token against the same
 *                   prompts evaluated whole (an engine without the prefix cache), and against an engine
 *                   that evaluates just the uncached tail (`tail_widen=0`).
 *   startup MODEL   `swarm up --agents 25 --engine batched`, then 25 tasks: time from `up` until every
 *                   agent has answered one.
 *   memory  MODEL   PSS of the whole swarm (hub, workers, engine) at 5 and 25 agents; per extra agent
 *                   beyond its KV cache; and what `swarm plan` says for 25.
 *   debate  MODEL   topologies/examples/diamond-debate.yaml on a long input (the debate's prompts all
 *                   start with it), with the prefix cache and without (`--driver-opt prefix_cache=0`),
 *                   each with flash attention auto, on and off (`flash_attn=`), in turn, two runs each:
 *                   wall time, total tokens/s, and prompt tokens evaluated vs reused.
 * Run: `npm run build && node dist/bench/batched.js prefix|share|startup|memory|debate MODEL [kv_unified=0]`
 * (`kv_unified=0`: share with a KV stream per sequence even when the self-built addon could unify them).
 */
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BatchedDriver } from '../drivers/batched/index.js';
import { machine, quantile } from './proc.js';
import { mb, processMemory } from './smaps.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'dist/cli/main.js');
const [what, model = '/work/shared/models/synth-llama-15M-shape-q8_0.gguf', kvArg] = process.argv.slice(2);
const kvOpt: Record<string, string> = kvArg === 'kv_unified=0' ? { kv_unified: '0' } : {};

/** The KV layout the engines of `dir` reported in their logs (`KV cache unified|per sequence`). */
function kvLayout(dir: string): string[] {
  const logs = path.join(dir, 'engines');
  if (!fs.existsSync(logs)) return [];
  return fs.readdirSync(logs).filter((f) => f.endsWith('.log'))
    .flatMap((f) => /KV cache (unified|per sequence) \(([\w-]+) binding\)/.exec(fs.readFileSync(path.join(logs, f), 'utf8'))?.slice(1, 3).join(', ') ?? []);
}

function swarm(args: string[], input?: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', input, timeout: 1_800_000, maxBuffer: 64 * 1024 * 1024 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function record(o: Record<string, unknown>): void {
  const out = { bench: what, machine: machine(), date: new Date().toISOString(), load_avg: os.loadavg(), model: path.basename(model), ...o };
  fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
  fs.appendFileSync(path.join(ROOT, 'bench/results/batched.jsonl'), JSON.stringify(out) + '\n');
  console.log(JSON.stringify(out, null, 2));
}

interface Ttft { ms: number; cached: number; tokensIn: number; engineMs: number; text: string }

/** Time to the first text at the caller, and as the engine saw it (from the chat's arrival there). */
async function ttft(d: BatchedDriver, prompt: string): Promise<Ttft> {
  const t0 = performance.now();
  const g = d.chat(prompt, { maxTokens: 12, temperature: 0 });
  let ms = -1;
  let text = '';
  let r = await g.next();
  while (!r.done) { if (ms < 0) ms = performance.now() - t0; text += r.value; r = await g.next(); }
  const st = r.value as { tokensCached: number; tokensIn: number; ttftMs?: number };
  return { ms: ms < 0 ? performance.now() - t0 : ms, cached: st.tokensCached, tokensIn: st.tokensIn, engineMs: st.ttftMs ?? -1, text };
}

async function prefix(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-prefix-'));
  const n = 8;
  const ds = Array.from({ length: n }, () => new BatchedDriver({ name: 'batched', model, options: { dir, sequences: String(n), ctx: '2048', threads: '1' } }));
  try {
    await Promise.all(ds.map((d) => d.start()));
    // ~1,500 tokens of shared document, then ~20 tokens that differ per agent and per round.
    const doc = Array.from({ length: 104 }, (_, i) => `Line ${i} of the shared input document says the same thing.`).join(' ');
    const tail = (a: number, round: number) => ` Agent ${a}, round ${round}: answer question ${a * 7 + round * 13} about the document now.`;
    const load = os.loadavg()[0];
    const cold = await Promise.all(ds.map((d, a) => ttft(d, doc + tail(a, 0))));
    const warm = await Promise.all(ds.map((d, a) => ttft(d, doc + tail(a, 1))));
    const p50 = (xs: { ms: number }[]) => Math.round(quantile(xs.map((x) => x.ms), 0.5));
    record({
      agents: n, prompt_tokens: cold[0]!.tokensIn, load_avg_1m_before: load,
      cold_ttft_p50_ms: p50(cold), warm_ttft_p50_ms: p50(warm), speedup: +(p50(cold) / Math.max(1, p50(warm))).toFixed(1),
      warm_tokens_cached: warm.map((w) => w.cached), cold_ttft_ms: cold.map((c) => Math.round(c.ms)), warm_ttft_ms: warm.map((w) => Math.round(w.ms)),
    });
  } finally {
    await Promise.all(ds.map((d) => d.stop()));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Prefix sharing across agents: one agent evaluates a ~1,500-token document with its question; then
 * each of the 7 others asks its own question about the same document, one after another, each on its
 * own sequence. Their time to first token against the same prompts on an engine without the prefix
 * cache (every prompt evaluated whole), and on an engine that shares the prefix but evaluates just the
 * remaining tail (`tail_widen=0`: the 11-12 tokens take flash attention's per-row kernel), interleaved.
 */
async function share(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-share-'));
  const n = 8;
  const engine = (extra: Record<string, string>) => Array.from({ length: n }, () => new BatchedDriver({ name: 'batched', model, options: { dir, sequences: String(n), ctx: '2048', threads: '1', ...kvOpt, ...extra } }));
  const ds = engine({});
  const exact = engine({ tail_widen: '0' });
  const plain = new BatchedDriver({ name: 'batched', model, options: { dir, sequences: '1', ctx: '2048', threads: '1', prefix_cache: '0' } });
  const all = [...ds, ...exact, plain];
  try {
    await Promise.all(all.map((d) => d.start()));
    const doc = Array.from({ length: 104 }, (_, i) => `Line ${i} of the shared input document says the same thing.`).join(' ');
    const ask = (a: number) => ` Agent ${a}: answer question ${a * 7} about the document now.`;
    const load = os.loadavg()[0];
    const first = await ttft(ds[0]!, doc + ask(0));
    await ttft(exact[0]!, doc + ask(0));
    const shared: Ttft[] = [];
    const tail: Ttft[] = [];
    const whole: Ttft[] = [];
    for (let a = 1; a < n; a++) {
      shared.push(await ttft(ds[a]!, doc + ask(a)));
      tail.push(await ttft(exact[a]!, doc + ask(a)));
      whole.push(await ttft(plain, doc + ask(a)));
    }
    const p50 = (xs: { ms: number }[]) => Math.round(quantile(xs.map((x) => x.ms), 0.5));
    const e50 = (xs: Ttft[]) => Math.round(quantile(xs.map((x) => x.engineMs), 0.5));
    record({
      agents: n, prompt_tokens: first.tokensIn, load_avg_1m_before: load, load_avg_1m_after: os.loadavg()[0], kv: kvLayout(dir),
      first_ttft_ms: Math.round(first.ms), shared_ttft_p50_ms: p50(shared), whole_ttft_p50_ms: p50(whole),
      speedup: +(p50(whole) / Math.max(1, p50(shared))).toFixed(1),
      tail_only_ttft_p50_ms: p50(tail), tail_only_speedup: +(p50(whole) / Math.max(1, p50(tail))).toFixed(1),
      shared_tokens_cached: shared.map((x) => x.cached), tail_only_tokens_cached: tail.map((x) => x.cached),
      shared_ttft_ms: shared.map((x) => Math.round(x.ms)), tail_only_ttft_ms: tail.map((x) => Math.round(x.ms)), whole_ttft_ms: whole.map((x) => Math.round(x.ms)),
      // As the engine saw it, from the chat's arrival: the rest is the socket and the caller.
      engine_ttft_p50_ms: { shared: e50(shared), tail_only: e50(tail), whole: e50(whole) },
      // Greedy: a prompt started from a copied prefix (widened or not) answers as the prompt evaluated whole.
      same_text: whole.every((w, i) => w.text === shared[i]!.text && w.text === tail[i]!.text),
    });
  } finally {
    await Promise.all(all.map((d) => d.stop()));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function startup(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-start-'));
  const n = 25;
  try {
    const load = os.loadavg()[0];
    const t0 = performance.now();
    const up = swarm(['up', '--agents', String(n), '--engine', 'batched', '--model', model, '--detach', '--json', '--state-dir', dir]);
    if (up.code !== 0) throw new Error(up.stderr);
    const readyMs = performance.now() - t0;
    const lines = Array.from({ length: n }, (_, i) => JSON.stringify({ id: `s-${i}`, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 })).join('\n');
    const sub = swarm(['submit', '--file', '-', '--wait', '--json', '--state-dir', dir], lines);
    const allMs = performance.now() - t0;
    const res = JSON.parse(sub.stdout) as { tasks: { state: string; receipt?: { worker?: string } }[] };
    record({
      agents: n, load_avg_1m_before: load, up_ready_ms: Math.round(readyMs), all_answered_ms: Math.round(allMs),
      done: res.tasks.filter((x) => x.state === 'done').length, distinct_workers: new Set(res.tasks.map((x) => x.receipt?.worker)).size,
    });
  } finally {
    swarm(['down', '--state-dir', dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** PSS of every process whose command line names `dir` (hub, workers, engine). */
function swarmPss(dir: string): { total: number; engine: number; workers: number; hub: number } {
  const o = { total: 0, engine: 0, workers: 0, hub: 0 };
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8');
      if (!cmd.includes(dir)) continue;
      const pss = processMemory(Number(p)).pss;
      o.total += pss;
      if (cmd.includes('batched/host')) o.engine += pss; else if (cmd.includes('\0worker\0')) o.workers += pss; else o.hub += pss;
    } catch { /* gone */ }
  }
  return o;
}

async function memory(): Promise<void> {
  const ctx = 512;
  const at = async (n: number) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-mem-'));
    try {
      const up = swarm(['up', '--agents', String(n), '--engine', 'batched', '--model', model, '--driver-opt', `ctx=${ctx}`, '--detach', '--json', '--state-dir', dir]);
      if (up.code !== 0) throw new Error(up.stderr);
      // Every sequence used once, so its KV cache pages are touched as in real use.
      const lines = Array.from({ length: n }, (_, i) => JSON.stringify({ id: `m-${i}`, prompt: 'Once upon a time', max_tokens: 16, temperature: 0 })).join('\n');
      swarm(['submit', '--file', '-', '--wait', '--state-dir', dir], lines);
      await new Promise((r) => setTimeout(r, 2000));
      const m = swarmPss(dir);
      return { agents: n, total_mb: mb(m.total), engine_mb: mb(m.engine), workers_mb: mb(m.workers), hub_mb: mb(m.hub) };
    } finally {
      swarm(['down', '--state-dir', dir]);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };
  const load = os.loadavg()[0];
  const small = await at(5);
  const big = await at(25);
  const plan = swarm(['plan', '--agents', '25', '--model', model, '--engine', 'batched', '--ctx', String(ctx), '--reserve', '0', '--json']);
  let planTotal: number | undefined;
  try { planTotal = (JSON.parse(plan.stdout) as { memory?: { total?: number } }).memory?.total; } catch { /* plan said no */ }
  const perAgent = (big.total_mb - small.total_mb) / 20;
  record({
    ctx_per_agent: ctx, load_avg_1m_before: load, at5: small, at25: big, pss_per_extra_agent_mb: +perAgent.toFixed(1),
    plan_25_total_mb: planTotal !== undefined ? mb(planTotal) : null, plan_vs_measured: planTotal !== undefined ? +(mb(planTotal) / big.total_mb).toFixed(2) : null,
    plan_output: planTotal === undefined ? (plan.stdout + plan.stderr).slice(0, 500) : undefined,
  });
}

/** One debate setting: the prefix cache on or off, and the flash-attention setting. */
interface DebateMode { cache: boolean; fa: 'auto' | 'on' | 'off' }
const modeName = (m: DebateMode) => `cache ${m.cache ? 'on' : 'off'}, flash_attn=${m.fa}`;

/** One diamond-debate run on a fresh swarm; its tokens from the nodes' receipts. */
function debateOnce(mode: DebateMode, input: string) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-debate-'));
  try {
    const load = os.loadavg()[0];
    const r = swarm(['run', path.join(ROOT, 'topologies/examples/diamond-debate.yaml'), '--model', model, '--json', '--state-dir', dir,
      '--driver-opt', `prefix_cache=${mode.cache ? 1 : 0}`, '--driver-opt', `flash_attn=${mode.fa}`, '--set', `inputs.text=${JSON.stringify(input)}`]);
    if (r.code !== 0) throw new Error(r.stderr.slice(-2000));
    const out = JSON.parse(r.stdout) as { state: string; dir: string; progress: { elapsed_ms: number; tokens_out: number } };
    let tokensIn = 0, cached = 0, tokensOut = 0;
    const texts: string[] = [];
    for (const line of fs.readFileSync(path.join(out.dir, 'nodes.jsonl'), 'utf8').split('\n')) {
      if (!line) continue;
      const node = JSON.parse(line) as { node?: string; output?: unknown; metrics?: { receipt?: { tokens_in?: number; tokens_cached?: number; tokens_out?: number } } };
      const rc = node.metrics?.receipt;
      tokensIn += rc?.tokens_in ?? 0; cached += rc?.tokens_cached ?? 0; tokensOut += rc?.tokens_out ?? 0;
      texts.push(`${node.node}\t${JSON.stringify(node.output ?? null)}`);
    }
    const s = out.progress.elapsed_ms / 1000;
    return {
      mode: modeName(mode), state: out.state, load_avg_1m_before: load, load_avg_1m_after: os.loadavg()[0], elapsed_s: +s.toFixed(2), tokens_out: tokensOut,
      prompt_tokens: tokensIn, prompt_tokens_reused: cached, prompt_tokens_evaluated: tokensIn - cached,
      tokens_per_s: +((tokensIn - cached + tokensOut) / s).toFixed(1), generated_tokens_per_s: +(tokensOut / s).toFixed(1),
      flash_attention: engineChoice(dir),
      outputs_hash: crypto.createHash('sha256').update(texts.sort().join('\n')).digest('hex').slice(0, 12),
    };
  } finally {
    swarm(['down', '--state-dir', dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** What the engines of `dir` said of flash attention in their logs (`flash attention on|off (why)`). */
function engineChoice(dir: string): string[] {
  const logs = path.join(dir, 'engines');
  if (!fs.existsSync(logs)) return [];
  return fs.readdirSync(logs).filter((f) => f.endsWith('.log'))
    .flatMap((f) => /flash attention (on|off) \(([^)]*)\)/.exec(fs.readFileSync(path.join(logs, f), 'utf8'))?.slice(1, 3).join(': ') ?? []);
}

async function debate(): Promise<void> {
  // A long shared start: the story file four times over (~1,100 tokens), as a document under debate would be.
  const story = fs.readFileSync(path.join(ROOT, 'topologies/examples/stories.txt'), 'utf8').replace(/\s+/g, ' ');
  const input = `${story} ${story} ${story} ${story} How should the little bird get home before the rain?`;
  const modes: DebateMode[] = (['auto', 'on', 'off'] as const).flatMap((fa) => [{ cache: true, fa }, { cache: false, fa }]);
  const runs = [...modes, ...modes].map((mode) => debateOnce(mode, input));
  const mean = (m: DebateMode) => +(runs.filter((x) => x.mode === modeName(m)).reduce((a, x) => a + x.elapsed_s, 0) / 2).toFixed(2);
  const byMode = Object.fromEntries(modes.map((m) => [modeName(m), { elapsed_s: runs.filter((x) => x.mode === modeName(m)).map((x) => x.elapsed_s), mean_s: mean(m) }]));
  const base = mean({ cache: false, fa: 'on' });
  record({ what: 'diamond-debate with and without the prefix cache, each with flash attention auto, on and off', runs, by_mode: byMode,
    speedup_auto_cached_vs_on_uncached: +(base / mean({ cache: true, fa: 'auto' })).toFixed(2),
    speedup_cache_with_auto: +(mean({ cache: false, fa: 'auto' }) / mean({ cache: true, fa: 'auto' })).toFixed(2),
    speedup_cache_with_on: +(base / mean({ cache: true, fa: 'on' })).toFixed(2) });
  console.log('\n| setting | wall s (two runs) | mean s | tokens out | prompt tokens evaluated / reused | flash attention |\n|---|---|---:|---:|---|---|');
  for (const m of modes) {
    const rs = runs.filter((x) => x.mode === modeName(m));
    console.log(`| ${modeName(m)} | ${rs.map((x) => x.elapsed_s).join(', ')} | ${mean(m)} | ${rs.map((x) => x.tokens_out).join(', ')} | ${rs.map((x) => `${x.prompt_tokens_evaluated} / ${x.prompt_tokens_reused}`).join(', ')} | ${rs[0]?.flash_attention.join('; ')} |`);
  }
}

if (what === 'prefix') await prefix();
else if (what === 'share') await share();
else if (what === 'debate') await debate();
else if (what === 'startup') await startup();
else if (what === 'memory') await memory();
else { process.stderr.write('usage: batched.js prefix|startup|memory|debate MODEL\n'); process.exit(2); }
process.exit(0);
