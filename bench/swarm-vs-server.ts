/**
 * The swarm against its limit: N agents through the hub in each engine mode (`swarm up --engine
 * batched`, `shared` = one llama-server -np N, `per-worker` embedded) versus a bare `llama-server -np N`
 * driven directly at every thread count 1..cores, with and without `-kvu` (the bar: the fastest in wall
 * time for `vs_best_bare`, the cheapest per token for `cpu_vs_best_bare`),
 * same model, same load (N concurrent streams, R requests each, T tokens per request), in one run.
 * Modes: `bare-T`, `bare-kvu-T`, `bare-nofa-T`, `bare-nofa-kvu-T` (`-fa off`: llama-server turns flash
 * attention on for the CPU, the engine off where its kernel runs scalar), `batched` (the default threads), `batched-T`, `batched-streams` (a KV
 * stream per sequence, `kv_unified=0`), `batched-unified` (one KV cache, `kv_unified=1`; `batched` runs what `kv_unified=auto` resolves), `batched-noahead` (`--lease-ahead-ms 0`: each task's chat after its result's round trip), `batched-step-K` (the engine's step fixed, K = sync, fused, split or overlap: SWARM_ENGINE_STEP; `batched` overlaps while a core idles beside its threads), `batched-fa-on`, `batched-fa-off` (flash attention fixed, where `batched` runs
 * what `flash_attn=auto` resolves), `batched-direct`, `batched-library` (the engine's own decode
 * loop or node-llama-cpp's, `loop=`; `-streams` after either: `kv_unified=0` too), `shared`, `per-worker`,
 * and `base`: the batched default of another build (SWARM_BENCH_BASE=its checkout, e.g. main's; SWARM_BENCH_BASE_ADDON=an
 * addon directory its engine loads instead of the cache entry), so a change and what it replaces meet the same neighbours in one run.
 * `loaded` as the sixth argument runs everything beside as many busy processes as cores, each in a
 * session of its own (engine-load.ts busyLoad: with the kernel's autogroup a session is one scheduling
 * entity), as a user's `swarm up` runs the hub, workers and engine (each detached) and a user runs
 * llama-server from a shell of its own.
 * Run: `npm run build && node dist/bench/swarm-vs-server.js [MODEL] [N] [R] [modes,...|default] [quiet|loaded]
 * [--cores K] [--threads LIST] [--busy K] [--llama-server PATH] [--out FILE] [--row-s S] [--submit http|cli]`: `--cores` the thread counts
 * tried (1..K; default the CPUs this process may use; `--threads 1,2,4` names them instead), `--busy` the competing processes when loaded (default K),
 * `--llama-server` the bare server's binary (or SWARM_BENCH_LLAMA_SERVER; default what `swarm engine
 * build` installed), `--row-s` the most a bare row runs (default 120; one that falls under a quarter
 * of the fastest bare row so far stops after 5 s, `cut_short`; `--submit`: the swarm's measured tasks go in through
 * the control API from inside the bench, as the bare rows are driven, or `cli` through a `swarm submit --wait`
 * command whose own start then counts, as it did before; each swarm row says where its wall time went around
 * its tasks: `before_first_task_s`, `tasks_span_s`, `after_last_task_s`, and the engine's own CPU: `engine_cpu_s`,
 * `engine_tokens_per_cpu_s`; the rest of `cpu_s` is the hub's and the workers'; every row: `machine_cpu`, the
 * machine's busy, idle and stolen share over the row). Prints one JSON line per row as it ends (stdout), then the run's line, which it
 * also appends to FILE (default bench/results/swarm-vs-server.jsonl): the load average, which mode
 * `swarm up` uses by default, which node-llama-cpp addon the batched engine loads. Needs at run time
 * only node, dist/ and the package's dependencies (no devDependencies, no tsc, no ../shared).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cpuSeconds, machine, machineCpu } from './proc.js';
import { busyLoad, runLoad, sharedServer } from './engine-load.js';
import { submitAndWait, type TaskView } from './submit-http.js';
import { CLI, ROOT, arg, argvErrors } from './args.js';
import { DEFAULT_ENGINE } from '../cli/shared-engine.js';
import { findSelfBuiltAddon } from '../drivers/llama-build/addon-paths.js';

const cores = Number(arg('cores', String(os.availableParallelism()), 'thread counts tried: 1..K'));
const busy = Number(arg('busy', String(cores), 'competing processes when loaded'));
const serverBin = arg('llama-server', '', "the bare server's binary") || process.env.SWARM_BENCH_LLAMA_SERVER;
const outFile = arg('out', path.join(ROOT, 'bench/results/swarm-vs-server.jsonl'));
const threadList = arg('threads', '', 'the thread counts tried, e.g. 1,2,4 (instead of 1..--cores)');
const rowS = arg('row-s', '120', 'the most a bare row runs, seconds');
const submitBy = arg('submit', 'http', "how the measured tasks go in: `http` (the control API from inside the bench, as the bare rows are driven) or `cli` (a `swarm submit --wait` command, whose own start counts too)");
// Options (declared above) anywhere on the line; the rest are positional.
const pos: string[] = [];
const options: string[] = [];
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i]!;
  if (!a.startsWith('--')) { pos.push(a); continue; }
  options.push(a);
  if (i + 1 < process.argv.length) options.push(process.argv[++i]!);
}
const bad = argvErrors(options);
if (bad) { process.stderr.write(`swarm-vs-server: ${bad}\n`); process.exit(2); }
const model = pos[0] ?? '/tmp/swarm-bench-models/synth-llama-110M-shape-q8_0.gguf';
const n = Number(pos[1] ?? 8);
const reqs = Number(pos[2] ?? 3);
if (submitBy !== 'http' && submitBy !== 'cli') { process.stderr.write('swarm-vs-server: --submit is http or cli\n'); process.exit(2); }
if (!fs.existsSync(model)) { process.stderr.write(`swarm-vs-server: no model at ${model}\n`); process.exit(2); }
if (!(cores >= 1 && busy >= 0 && n >= 1 && reqs >= 1)) { process.stderr.write('swarm-vs-server: N, R, --cores and --busy must be numbers\n'); process.exit(2); }
const threadCounts = threadList ? threadList.split(',').map(Number) : Array.from({ length: cores }, (_, i) => i + 1);
// A bare row stops after this long, or after 5 s at under a quarter of the fastest bare row so far
// (threads spinning against a busy machine: 2 threads gave 13 tokens/s where 1 gave 450), its
// streamed tokens counted: a collapsing configuration costs bounded time, not minutes.
const rowMs = Number(rowS) * 1000;
const DEFAULT_MODES = [...['bare', 'bare-kvu', 'bare-nofa', 'bare-nofa-kvu'].flatMap((b) => threadCounts.map((t) => `${b}-${t}`)), 'batched'].join(',');
// `default` names every bare row and the default engine; it may stand inside a list (`batched,default`).
const modes = (pos[3] ?? 'default').split(',').flatMap((m) => (m === 'default' ? DEFAULT_MODES.split(',') : [m]));
const condition = pos[4] === 'loaded' ? 'loaded' : 'quiet';
const TOKENS = 64;
const WARM_TASKS = 48; // 3,072 tokens
const CTX = 512; // per agent: the prompts are short; keeps 25 agents' KV caches small

function swarmAt(args: string[], input?: string, cli = CLI, env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input, env: { ...process.env, ...(serverBin ? { SWARM_LLAMA_BIN_DIR: path.dirname(serverBin) } : {}), ...env }, timeout: 1_800_000, maxBuffer: 64 * 1024 * 1024 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * CPU seconds used so far by every process of the swarm in `dir` (hub, workers, engines: each names
 * the state dir on its command line). On a shared, busy machine tokens per CPU-second is the fairer
 * figure: wall-clock rates follow the other sessions' load.
 */
function swarmCpu(dir: string): { all: number; engine: number } {
  let all = 0, engine = 0;
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8');
      if (!cmd.includes(dir)) continue;
      const s = cpuSeconds(Number(p));
      all += s;
      // The batched engine's host (drivers/batched/host.js): the rest is the hub and the workers.
      if (cmd.includes(`batched${path.sep}host`)) engine += s;
    } catch { /* gone */ }
  }
  return { all, engine };
}

/** Tokens/s of N*R tasks through a running swarm (submit to last result), from the receipts. */
async function throughSwarm(engine: string, extra: string[], label: string, cli = CLI, env: Record<string, string> = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-'));
  const swarm = (args: string[], input?: string) => swarmAt(args, input, cli, env);
  // What the engine resolved and where its time went, from its log once it has exited (filled in below).
  const engineLog: { kv?: string; threads_at_exit?: string; loop_at_exit?: string; handoff_at_exit?: string } = {};
  try {
    const up = swarm(['up', '--agents', String(n), '--engine', engine, '--model', model, '--detach', '--json', '--state-dir', dir, '--ready-timeout', '600000', ...extra]);
    if (up.code !== 0) throw new Error(up.stderr);
    const ready = JSON.parse(up.stdout) as { ready_ms: number };
    const lines = (tag: string, k: number) => Array.from({ length: k }, (_, i) => JSON.stringify({ id: `${tag}-${i}`, prompt: 'Once upon a time', max_tokens: TOKENS, temperature: 0, seed: i })).join('\n');
    // Warm beyond the bare server's one request per slot: hub, workers and engine are JavaScript, and V8
    // compiles their hot paths over the first few thousand tokens (the engine's compiler threads took
    // ~140 µs per token over its first 1,500 tokens, ~14 after 4,500: 15M shape, 8 agents), which a
    // long-lived swarm does not pay and llama-server, compiled ahead, never does.
    swarm(['submit', '--file', '-', '--wait', '--state-dir', dir], lines('warm', Math.max(n, WARM_TASKS)));
    const load = os.loadavg()[0];
    const cpu0 = swarmCpu(dir);
    const t0 = performance.now();
    const e0 = Date.now();
    const res = submitBy === 'cli'
      ? JSON.parse(swarm(['submit', '--file', '-', '--wait', '--json', '--state-dir', dir], lines('run', n * reqs)).stdout) as { tasks: TaskView[] }
      : await submitAndWait(dir, lines('run', n * reqs).split('\n').map((l) => JSON.parse(l) as Record<string, unknown>));
    const wall = (performance.now() - t0) / 1000;
    const e1 = Date.now();
    const cpu1 = swarmCpu(dir), cpu = cpu1.all - cpu0.all, engineCpu = cpu1.engine - cpu0.engine;
    const tokens = res.tasks.reduce((a, x) => a + (x.receipt?.tokens_out ?? 0), 0);
    // Where the wall time went around the tasks themselves: from the submit command's start to the
    // first task's start (the command's own start-up, the submission, its journaling, the first
    // leases), and from the last task's end to the command's exit (the result's way back to it).
    const starts = res.tasks.map((x) => x.receipt?.started_at).filter((x): x is number => x !== undefined);
    const ends = res.tasks.map((x) => x.receipt?.finished_at).filter((x): x is number => x !== undefined);
    const around = starts.length && ends.length ? { before_first_task_s: +((Math.min(...starts) - e0) / 1000).toFixed(3), tasks_span_s: +((Math.max(...ends) - Math.min(...starts)) / 1000).toFixed(3), after_last_task_s: +((e1 - Math.max(...ends)) / 1000).toFixed(3) } : {};
    return { mode: label, submit: submitBy, ready_ms: ready.ready_ms, done: res.tasks.filter((x) => x.state === 'done').length, tokens, wall_s: +wall.toFixed(2), tokens_per_s: Math.round(tokens / wall), ...around, cpu_s: +cpu.toFixed(2), tokens_per_cpu_s: Math.round(tokens / cpu), engine_cpu_s: +engineCpu.toFixed(2), engine_tokens_per_cpu_s: engineCpu > 0 ? Math.round(tokens / engineCpu) : null, load_avg_1m_before: load, engine: engineLog };
  } finally {
    swarm(['down', '--state-dir', dir]);
    try {
      const logs = path.join(dir, 'engines');
      const text = fs.readdirSync(logs).filter((f) => f.endsWith('.log')).map((f) => fs.readFileSync(path.join(logs, f), 'utf8')).join('\n');
      const kv = /KV cache ([^(]+)\(([^)]*)\)/.exec(text);
      if (kv) engineLog.kv = `${kv[1]!.trim()} (${kv[2]}); flash attention ${/flash attention (on|off) \(/.exec(text)?.[1] ?? '?'}`;
      const line = (re: RegExp) => re.exec(text)?.[1]?.trim();
      const threads = line(/threads at exit (.*)/), loop = line(/loop at exit: (.*)/), handoff = line(/hand-off at exit: (.*)/);
      if (handoff) engineLog.handoff_at_exit = handoff;
      if (threads) engineLog.threads_at_exit = threads;
      if (loop) engineLog.loop_at_exit = loop;
    } catch { /* no engine log */ }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function bare(threads: number, kvu: boolean, fa = true) {
  const set = await sharedServer(model, n, threads, CTX, [kvu ? '-kvu' : '', fa ? '' : '-fa off'].filter(Boolean).join(' '), serverBin);
  try {
    await runLoad(set, 1, TOKENS, { maxMs: 5000 }); // warm-up
    const load = os.loadavg()[0];
    const fastest = Math.max(0, ...rows.filter((x) => x.mode.startsWith('bare')).map((x) => x.tokens_per_s));
    const r = await runLoad(set, reqs, TOKENS, { maxMs: rowMs, stopIf: (tokens, ms) => ms >= 5000 && tokens / ms * 1000 < fastest / 4 });
    return { mode: `bare llama-server -np ${n} -t ${threads}${kvu ? ' -kvu' : ''}${fa ? '' : ' -fa off'}`, tokens: r.tokens, wall_s: +r.wall_s.toFixed(2), tokens_per_s: Math.round(r.tokens_per_s), cpu_s: r.engine_cpu_s, tokens_per_cpu_s: Math.round(r.tokens_per_cpu_s), load_avg_1m_before: load, ...(r.cut_short ? { cut_short: true } : {}) };
  } finally { await set.stop(); }
}

// The competing load runs for the whole bench (bounded): every row meets the same neighbours.
const competing = condition === 'loaded' && busy > 0 ? busyLoad(busy, 3_600_000) : undefined;
// Sessions the competing processes run in (distinct autogroups): each should be its own.
const busySessions = new Set(competing?.pids.map((p) => { try { return fs.readFileSync(`/proc/${p}/autogroup`, 'utf8').split(' ')[0]; } catch { return `pid ${p}`; } })).size;
process.on('exit', () => competing?.stop());
const rows: { mode: string; tokens_per_s: number; tokens_per_cpu_s: number }[] = [];
for (const m of modes) {
  const cpu0 = machineCpu();
  if (m.startsWith('bare-nofa-kvu-')) rows.push(await bare(Number(m.slice(14)), true, false));
  else if (m.startsWith('bare-nofa-')) rows.push(await bare(Number(m.slice(10)), false, false));
  else if (m.startsWith('bare-kvu-')) rows.push(await bare(Number(m.slice(9)), true));
  else if (m.startsWith('bare-')) rows.push(await bare(Number(m.slice(5)), false));
  else if (m === 'batched') rows.push(await throughSwarm('batched', ['--driver-opt', `ctx=${CTX}`], 'swarm batched (default threads)'));
  else if (/^batched-fa-(on|off)$/.test(m)) rows.push(await throughSwarm('batched', ['--driver-opt', `flash_attn=${m.slice(11)}`, '--driver-opt', `ctx=${CTX}`], `swarm batched, flash attention ${m.slice(11)}`));
  else if (m === 'batched-streams') rows.push(await throughSwarm('batched', ['--driver-opt', 'kv_unified=0', '--driver-opt', `ctx=${CTX}`], 'swarm batched, a KV stream per sequence'));
  else if (m === 'batched-unified') rows.push(await throughSwarm('batched', ['--driver-opt', 'kv_unified=1', '--driver-opt', `ctx=${CTX}`], 'swarm batched, one unified KV cache'));
  else if (/^batched-(direct|library)(-streams)?$/.test(m)) {
    const [, loop, streams] = /^batched-(direct|library)(-streams)?$/.exec(m)!;
    rows.push(await throughSwarm('batched', ['--driver-opt', `loop=${loop}`, ...(streams ? ['--driver-opt', 'kv_unified=0'] : []), '--driver-opt', `ctx=${CTX}`], `swarm batched, ${loop === 'direct' ? 'its own' : "node-llama-cpp's"} decode loop${streams ? ', a KV stream per sequence' : ''}`));
  }
  else if (m === 'batched-noahead') rows.push(await throughSwarm('batched', ['--lease-ahead-ms', '0', '--driver-opt', `ctx=${CTX}`], 'swarm batched, no lease ahead'));
  else if (/^batched-step-(sync|fused|split|overlap)$/.test(m)) rows.push(await throughSwarm('batched', ['--driver-opt', `ctx=${CTX}`], `swarm batched, ${m.slice(13)} step`, CLI, { SWARM_ENGINE_STEP: m.slice(13) }));
  else if (m.startsWith('batched-')) rows.push(await throughSwarm('batched', ['--driver-opt', `threads=${m.slice(8)}`, '--driver-opt', `ctx=${CTX}`], `swarm batched -t ${m.slice(8)}`));
  else if (m === 'base') {
    const base = process.env.SWARM_BENCH_BASE;
    if (!base) throw new Error('mode base needs SWARM_BENCH_BASE=<another checkout, built>');
    // SWARM_BENCH_BASE_ADDON: the base build's engine loads that addon directory (SWARM_ADDON), e.g. a
    // copy of the cache entry before a change to what `engine build --addon` installs.
    const baseAddon = process.env.SWARM_BENCH_BASE_ADDON;
    rows.push(await throughSwarm('batched', ['--driver-opt', `ctx=${CTX}`], `base batched (${base}${baseAddon ? `, addon ${baseAddon}` : ''})`, path.join(base, 'dist/cli/main.js'), baseAddon ? { SWARM_ADDON: baseAddon } : {}));
  } else if (m === 'shared') rows.push(await throughSwarm('shared', [], 'swarm shared llama-server'));
  else if (m === 'per-worker') rows.push(await throughSwarm('per-worker', ['--driver-opt', `ctx=${CTX}`], 'swarm per-worker embedded'));
  // The machine's CPU over the row (its start and warm-up too), all cores: busy, idle, and stolen by the hypervisor. On a shared VM
  // a row that ran slow with more CPU per token than its neighbours may have met a host that took the
  // vCPUs away (steal), which no load average shows.
  const cpu1 = machineCpu();
  const all = cpu1.busy - cpu0.busy + cpu1.idle - cpu0.idle + cpu1.steal - cpu0.steal;
  const last = rows[rows.length - 1] as Record<string, unknown> | undefined;
  if (last && all > 0) last.machine_cpu = { busy_pct: pct(cpu1.busy - cpu0.busy, all), idle_pct: pct(cpu1.idle - cpu0.idle, all), steal_pct: pct(cpu1.steal - cpu0.steal, all) };
  process.stdout.write(JSON.stringify({ row: rows[rows.length - 1], load_avg: os.loadavg() }) + '\n');
}
const bares = rows.filter((r) => r.mode.startsWith('bare'));
const none = { mode: 'none', tokens_per_s: NaN, tokens_per_cpu_s: NaN };
const best = bares.reduce((a, r) => (r.tokens_per_s > a.tokens_per_s ? r : a), bares[0] ?? none);
// Per CPU-second the bar is the bare server that spends least per token, which need not be the fastest.
const bestCpu = bares.reduce((a, r) => (r.tokens_per_cpu_s > a.tokens_per_cpu_s ? r : a), bares[0] ?? none);
competing?.stop();
const out = { machine: machine(), date: new Date().toISOString(), condition, competing: competing ? { processes: busy, sessions: busySessions } : null, cores, load_avg: os.loadavg(), model: path.basename(model), agents: n, requests_per_agent: reqs, tokens_per_request: TOKENS, ctx_per_agent: CTX,
  best_bare: best.mode, best_bare_cpu: bestCpu.mode, default_engine: DEFAULT_ENGINE, addon: findSelfBuiltAddon()?.addon ?? 'prebuilt', rows: rows.map((r) => ({ ...r, vs_best_bare: +(r.tokens_per_s / best.tokens_per_s).toFixed(2), cpu_vs_best_bare: +(r.tokens_per_cpu_s / bestCpu.tokens_per_cpu_s).toFixed(2) })) };
fs.mkdirSync(path.dirname(outFile), { recursive: true });
fs.appendFileSync(outFile, JSON.stringify(out) + '\n');
process.stdout.write(JSON.stringify(out) + '\n');

function pct(x: number, all: number): number { return Math.round(x / all * 1000) / 10; }
