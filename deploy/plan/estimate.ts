/**
 * The capacity model behind `swarm plan`: pure arithmetic over a ModelShape and a machine.
 * Every default is either measured on this project's machine or taken from llama.cpp's sources;
 * the comments say which. Memory is counted as resident bytes (what the OOM killer and cgroups see).
 */
import { supervisedProcesses, type Procs } from '../../cli/procs.js';
import type { ModelShape } from './gguf.js';
import { formatBytes } from '../../protocol/bytes.js';

/**
 * Engine layout: one llama.cpp engine per worker (isolation) or one batched engine all workers share
 * (`shared`: llama-server -np N; `batched`: the node-llama-cpp engine, a sequence per worker: the same arithmetic).
 */
export type EngineMode = 'per-worker' | 'shared' | 'batched';

/** Inputs of a plan. Only `agents` is required. */
export interface PlanOptions {
  agents: number;
  ramBytes?: number;
  cpus?: number;
  ctx?: number;
  engine?: EngineMode;
  /** llama.cpp micro-batch (`-ub`); its logits buffer is ubatch x vocab floats. */
  ubatch?: number;
  /** llama.cpp's default on x86 is to repack Q4_0/Q4_K/IQ4_NL weights (`--no-repack` turns it off). */
  repack?: boolean;
  /** OS, container runtime and k3s (the spec's 2 GB). */
  reserveBytes?: number;
  /** One Node worker process (measured: 57 MiB RSS, node 20 with pino/commander/zod/msgpackr loaded). */
  workerRssBytes?: number;
  /** Engine heap besides weights, KV and compute (measured: ~28 MiB anonymous for node-llama-cpp with a context). */
  engineBaseBytes?: number;
  /** The hub process (Node, queue, journal buffers). */
  hubRssBytes?: number;
  /** Memory bandwidth used for the token-rate ceiling (assumed; VPS vCPUs typically see 8-20 GB/s). */
  bandwidthGBs?: number;
  /**
   * `swarm up --procs`: how many worker processes the agents run in (cli/procs.ts; auto: for the
   * batched engine one per vCPU less one, else one per agent). Counted for the batched engine,
   * whose agents are thin clients that share processes.
   */
  procs?: Procs;
}

const MiB = 1024 ** 2;

/*
 * The batched engine's memory besides weights, KV, logits and compute, from `swarm up -n 8|25|100|200
 * --procs auto|2|N` with the demo model and failover (the defaults) on 2 vCPUs, summing
 * /proc/PID/smaps_rollup (RSS) over the worker processes, idle and after a batch of 200-5,000 tasks.
 * RSS, not PSS: a process's share of the Node binary (PSS) depends on how many Node processes run,
 * while a cgroup is charged for what each faults in.
 *
 * Worker processes: one process of 8 agents 58-62 MiB RSS, of 25 62-78, of 100 95-114, of 200
 * 127-147; after 5,000 tasks 81 (8 agents) and 85 (25). 25 processes of one agent: 1,427-1,485 MiB,
 * 57-59 each, 18-19 PSS (the 18 MiB each agent was counted at while it had a process of its own),
 * 16-18 of it anonymous. So a process at 80 MiB, each further one at 40 (what it does not share with
 * the first, and room for a batch's 20 MiB of heap), and each agent in one 1 MiB more (0.2-1.1
 * measured; 0.3 from 100 agents to 200).
 */
const BATCHED_PROCESS_BYTES = 80 * MiB;
const BATCHED_MORE_PROCESS_BYTES = 40 * MiB;
const BATCHED_AGENT_BYTES = 1 * MiB;
/*
 * The engine is a Node process of its own (drivers/batched/host.ts): 101-132 MiB RSS with 8
 * sequences, 150-158 with 25, 248-253 with 100, 369 with 200, where the plan's engine heap, compute,
 * weights and KV came to 40, 57, 133 and 234. Its runtime (Node and node-llama-cpp) ~90 MiB, and
 * each sequence 1.2-1.3 MiB against 1.0 of KV and logits: counted as 96 MiB and 0.5 MiB a sequence.
 */
const BATCHED_ENGINE_PROCESS_BYTES = 96 * MiB;
const BATCHED_SEQUENCE_BYTES = MiB / 2;

/** Plan defaults (see PlanOptions for where each comes from). */
export const PLAN_DEFAULTS = {
  ramBytes: 16 * 1024 ** 3, cpus: 4, ctx: 2048, engine: 'per-worker' as EngineMode, ubatch: 512, repack: true,
  reserveBytes: 2 * 1024 ** 3, workerRssBytes: 60 * 1024 ** 2, engineBaseBytes: 30 * 1024 ** 2,
  hubRssBytes: 100 * 1024 ** 2, bandwidthGBs: 10, procs: 'auto' as Procs,
};

/** One warning of a plan, with a stable code for scripts. */
export interface PlanWarning { code: 'repack' | 'cgroup' | 'cpu' | 'no-fit' | 'ctx' | 'compute'; message: string }

/** Bytes of each component; `perAgent` is repeated per agent, `fixed` once per host. */
export interface PlanMemory {
  perAgent: { kv: number; compute: number; output: number; engine: number; privateWeights: number; worker: number; total: number };
  /** `workerProcesses`: the batched engine's worker processes (their agents are in `perAgent.worker`); 0 for a process per agent. */
  fixed: { reserve: number; hub: number; workerProcesses: number; sharedWeights: number; privateWeights: number; engine: number; compute: number; total: number };
  total: number;
}

/** The result of `plan()`. Serialised as-is by `swarm plan --json`. */
export interface Plan {
  model: Pick<ModelShape, 'path' | 'architecture' | 'fileBytes' | 'layers' | 'headCount' | 'headCountKv' | 'keyLength' | 'valueLength' | 'embeddingLength' | 'vocabSize' | 'trainContext' | 'dominantType' | 'repackableBytes'>;
  options: Required<Omit<PlanOptions, 'agents'>> & { agents: number };
  kvBytesPerToken: number;
  memory: PlanMemory;
  fits: boolean;
  maxAgents: number;
  /** Worker processes the agents run in (`options.procs`, cli/procs.ts supervisedProcesses). */
  workerProcesses: number;
  /** Tokens/s ceilings from memory bandwidth: every decode step streams all weights once per engine. */
  tokensPerSecond: { aggregateCeiling: number; perAgentCeiling: number };
  /** The spec's arithmetic (section 11.2) next to ours. */
  spec: { perAgentBytes: number; reserveBytes: number; agents: number; ours: number; breaks: string[] };
  warnings: PlanWarning[];
  /** Most agents that fit under other settings (engine sharing, no repack, a smaller micro-batch). */
  alternatives: { label: string; perAgentBytes: number; maxAgents: number }[];
}

/** KV cache bytes per token with f16 K and V: sum over layers of kv_heads x (key_length + value_length) x 2 bytes. */
export function kvBytesPerToken(m: ModelShape): number {
  return m.kvHeadsTotal * (m.keyLength + m.valueLength) * 2;
}

/**
 * llama.cpp's CPU compute buffer for one context, with flash attention (the default `-fa auto` on CPU):
 * the graph's biggest live tensors are the logits of one micro-batch (ubatch x vocab f32) plus two
 * ubatch x n_embd activations. Within 0.01 MiB of llama.cpp's figure for synth-15M (63.63 MiB) and
 * 2.3 MiB under it for stories260K (3.52 MiB), where small fixed buffers dominate.
 */
export function computeBufferBytes(m: ModelShape, ctx: number, ubatch: number): number {
  const ub = Math.min(ubatch, ctx);
  return 4 * ub * (m.vocabSize + 2 * m.embeddingLength);
}

const GB = 1e9;

/** Compute a capacity plan. Pure: same inputs, same plan. */
export function plan(m: ModelShape, opts: PlanOptions, nested = false): Plan {
  const o = { ...PLAN_DEFAULTS, ...stripUndefined(opts) } as Plan['options'];
  const kvpt = kvBytesPerToken(m);
  const kv = kvpt * o.ctx;
  const compute = computeBufferBytes(m, o.ctx, o.ubatch);
  const output = 4 * m.vocabSize; // llama_context::output_reserve: one row of logits per sequence
  const repacked = o.repack ? m.repackableBytes : 0;
  const perWorker = o.engine === 'per-worker';
  const batched = o.engine === 'batched';
  // The worker processes of `n` agents on the planned machine, laid out as `swarm up` does it there.
  const processes = (n: number): number => supervisedProcesses(n, perWorker ? 'embedded' : batched ? 'batched' : 'llama-server', o.procs, o.engine === 'shared', o.cpus);
  // The batched engine's worker processes (its agents load no llama.cpp: thin clients, several to a
  // process). Per-worker engines and a shared llama-server's clients stay at a process per agent:
  // that is what `swarm up` runs by default, and engines packed into fewer processes were not measured.
  const processBytes = (n: number): number => {
    const k = batched ? processes(n) : 0;
    return k === 0 ? 0 : BATCHED_PROCESS_BYTES + (k - 1) * BATCHED_MORE_PROCESS_BYTES;
  };
  const pa = {
    kv, output, worker: batched ? BATCHED_AGENT_BYTES : o.workerRssBytes,
    compute: perWorker ? compute : 0,
    engine: perWorker ? o.engineBaseBytes : batched ? BATCHED_SEQUENCE_BYTES : 0,
    privateWeights: perWorker ? repacked : 0,
    total: 0,
  };
  pa.total = pa.kv + pa.output + pa.worker + pa.compute + pa.engine + pa.privateWeights;
  const fx = {
    reserve: o.reserveBytes, hub: o.hubRssBytes, workerProcesses: processBytes(o.agents),
    // Repacked tensors are read once from the mmap at load; their page cache is reclaimable afterwards.
    sharedWeights: m.fileBytes - repacked,
    privateWeights: perWorker ? 0 : repacked,
    engine: perWorker ? 0 : o.engineBaseBytes + (batched ? BATCHED_ENGINE_PROCESS_BYTES : 0),
    compute: perWorker ? 0 : compute,
    total: 0,
  };
  const host = fx.reserve + fx.hub + fx.sharedWeights + fx.privateWeights + fx.engine + fx.compute;
  fx.total = host + fx.workerProcesses;
  const total = fx.total + pa.total * o.agents;
  // The most agents whose memory, processes included, fits: the processes grow with the agents
  // (never shrink), so the count that fits is found by bisection under the bound without them.
  const fitsN = (n: number): boolean => host + processBytes(n) + pa.total * n <= o.ramBytes;
  let lo = 0;
  let hi = Math.max(0, Math.floor((o.ramBytes - host) / pa.total));
  while (lo < hi) { const mid = Math.ceil((lo + hi) / 2); if (fitsN(mid)) lo = mid; else hi = mid - 1; }
  const maxAgents = lo;
  // Per-worker engines each stream all weights per token; a batched engine streams them once per step
  // for all its sequences (then CPU compute, not bandwidth, is the limit, so this is only a ceiling).
  const aggregate = (o.bandwidthGBs * GB) / m.fileBytes * (perWorker ? 1 : o.agents);
  const tps = { aggregateCeiling: round2(aggregate), perAgentCeiling: round2(aggregate / o.agents) };
  const p: Plan = {
    model: pick(m), options: o, kvBytesPerToken: kvpt,
    memory: { perAgent: pa, fixed: fx, total },
    fits: total <= o.ramBytes, maxAgents, workerProcesses: processes(o.agents), tokensPerSecond: tps,
    spec: specComparison(m, o, maxAgents),
    warnings: [],
    alternatives: [],
  };
  p.warnings = warnings(m, p);
  if (!nested) p.alternatives = alternatives(m, opts);
  return p;
}

/** Section 11.2: "2 GB system, 5 GB model shared, 300 MB context + 50 MB runtime per agent: 9 GB / 0.35 GB = 25". */
function specComparison(m: ModelShape, o: Plan['options'], oursMax: number): Plan['spec'] {
  const perAgentBytes = 350e6;
  const reserveBytes = 2e9;
  const agents = Math.max(0, Math.floor((o.ramBytes - reserveBytes - m.fileBytes) / perAgentBytes));
  const breaks: string[] = [];
  const ctxBytes = kvBytesPerToken(m) * o.ctx + computeBufferBytes(m, o.ctx, o.ubatch);
  breaks.push(`"300 MB context": KV cache ${formatBytes(kvBytesPerToken(m) * o.ctx)} at ${o.ctx} tokens plus a compute buffer of ${formatBytes(computeBufferBytes(m, o.ctx, o.ubatch))} (ubatch ${o.ubatch} x vocab ${m.vocabSize} logits) = ${formatBytes(ctxBytes)} per engine`);
  breaks.push(`"50 MB runtime": a Node worker is ${formatBytes(o.workerRssBytes)} RSS, plus ${formatBytes(o.engineBaseBytes)} engine heap per engine process`);
  if (m.repackableBytes > 0) breaks.push(`"model shared": ${formatBytes(m.repackableBytes)} of ${m.dominantType} weights are repacked into a private copy per engine on x86 unless --no-repack, so N engines hold N copies`);
  breaks.push(`"25 agents on 4 vCPU": each decode step streams ${formatBytes(m.fileBytes)} of weights; ${o.agents} agents share ${o.cpus} vCPUs and one memory bus`);
  breaks.push(`"page cache counted once": true for the host, but each container's cgroup is charged for the pages it faults in first`);
  return { perAgentBytes, reserveBytes, agents, ours: oursMax, breaks };
}

function alternatives(m: ModelShape, opts: PlanOptions): Plan['alternatives'] {
  const variants: [string, Partial<PlanOptions>][] = [
    ['per-worker engines', { engine: 'per-worker', repack: true, ubatch: 512 }],
    ['per-worker engines, --no-repack', { engine: 'per-worker', repack: false, ubatch: 512 }],
    ['per-worker engines, --no-repack, --ubatch 64', { engine: 'per-worker', repack: false, ubatch: 64 }],
    ['one shared engine', { engine: 'shared', repack: true, ubatch: 512 }],
  ];
  return variants.map(([label, v]) => {
    const q = plan(m, { ...opts, ...v }, true);
    return { label, perAgentBytes: q.memory.perAgent.total, maxAgents: q.maxAgents };
  });
}

function warnings(m: ModelShape, p: Plan): PlanWarning[] {
  const o = p.options;
  const w: PlanWarning[] = [];
  const perWorker = o.engine === 'per-worker';
  if (!p.fits) w.push({ code: 'no-fit', message: `${o.agents} agents need ${formatBytes(p.memory.total)} but the machine has ${formatBytes(o.ramBytes)}; at most ${p.maxAgents} fit` });
  if (m.repackableBytes > 0 && o.repack && perWorker) {
    w.push({ code: 'repack', message: `${m.dominantType} weights: llama.cpp on x86 repacks ${formatBytes(m.repackableBytes)} into a private buffer in every engine (${o.agents} engines = ${formatBytes(m.repackableBytes * o.agents)}). Run llama-server with --no-repack (plan with --no-repack) or use --engine shared` });
  } else if (m.repackableBytes > 0 && o.repack) {
    w.push({ code: 'repack', message: `the shared engine holds one private repacked copy (${formatBytes(m.repackableBytes)}) of the ${m.dominantType} weights; that is counted once` });
  }
  w.push({ code: 'cgroup', message: `page cache of the shared model (${formatBytes(p.memory.fixed.sharedWeights)}) is charged to the cgroup of the container that first reads each page: one container may be charged for all of it. Pre-read the model on the host (cat model.gguf > /dev/null) before starting containers, or give each container's memory limit room for the model` });
  if (o.agents > o.cpus) {
    w.push({ code: 'cpu', message: `${o.agents} agents on ${o.cpus} vCPUs: ${perWorker ? 'give each engine 1 thread (llama-server -t 1) or the threads oversubscribe; ' : ''}decode's memory-bandwidth ceiling is ${p.tokensPerSecond.aggregateCeiling} tokens/s in total (${o.bandwidthGBs} GB/s assumed), ${p.tokensPerSecond.perAgentCeiling} per agent${perWorker ? '' : ' (a ceiling: CPU compute caps batched decode lower)'}` });
  }
  if (m.trainContext > 0 && o.ctx > m.trainContext) w.push({ code: 'ctx', message: `--ctx ${o.ctx} is beyond the model's trained context ${m.trainContext}` });
  if (perWorker && p.memory.perAgent.compute > p.memory.perAgent.kv) {
    const smaller = computeBufferBytes(m, o.ctx, 64);
    w.push({ code: 'compute', message: `the compute buffer (${formatBytes(p.memory.perAgent.compute)}) exceeds the KV cache (${formatBytes(p.memory.perAgent.kv)}); a smaller micro-batch (--ubatch 64, llama-server -ub 64) cuts it to ${formatBytes(smaller)} at some prompt-speed cost` });
  }
  return w;
}

function pick(m: ModelShape): Plan['model'] {
  const { path, architecture, fileBytes, layers, headCount, headCountKv, keyLength, valueLength, embeddingLength, vocabSize, trainContext, dominantType, repackableBytes } = m;
  return { path, architecture, fileBytes, layers, headCount, headCountKv, keyLength, valueLength, embeddingLength, vocabSize, trainContext, dominantType, repackableBytes };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;
