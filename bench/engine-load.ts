/**
 * Load generation for the engine benchmarks: start engines through the real drivers, drive N
 * concurrent agents each doing a bounded number of requests, and measure tokens/s, time to first
 * token and memory (PSS) of the engine processes. Drives drivers directly; no hub involved.
 */
import { spawn } from 'node:child_process';
import type { Driver } from '../drivers/types.js';
import { BatchedDriver } from '../drivers/batched/index.js';
import { LlamaServerDriver } from '../drivers/llama-server/index.js';
import { embeddedFactory } from '../drivers/embedded/index.js';
import { fileMapping, processMemory } from './smaps.js';
import { cpuSeconds, quantile } from './proc.js';

/** A set of engines and the per-agent driver each agent talks to. */
export interface EngineSet {
  mode: string;
  /** One driver per agent (clients of a shared engine, or one engine each). */
  agents: Driver[];
  /** Every engine pid (for memory accounting). */
  pids(): number[];
  stop(): Promise<void>;
}

export interface LoadResult {
  requests: number;
  tokens: number;
  wall_s: number;
  tokens_per_s: number;
  ttft_p50_ms: number;
  ttft_p99_ms: number;
  /** CPU seconds the engine processes used during the load, and tokens per CPU second (less sensitive to a busy machine). */
  engine_cpu_s: number;
  tokens_per_cpu_s: number;
  /** Requests retried after failing before their first token, and requests that failed. */
  retries: number;
  errors: number;
}

export interface MemoryResult {
  engines: number;
  total_pss_mb: number;
  pss_per_agent_mb: number;
  total_rss_mb: number;
  /** Sum over engines of the model mapping's PSS: the model counted once when it is shared. */
  model_pss_mb: number;
  model_rss_mb: number;
}

const mbOf = (b: number): number => Math.round(b / 1048576 * 10) / 10;

/** N llama-server processes, each with one slot (the spec's engine per worker). */
export function perWorkerServers(model: string, n: number, threads: number, ctxPerSlot: number, args = ''): Promise<EngineSet> {
  return startEach('per-worker', Array.from({ length: n }, () => new LlamaServerDriver({
    name: 'llama-server', model, options: { slots: '1', ctx: String(ctxPerSlot), threads: String(threads), ...(args ? { args } : {}) },
  })));
}

/** N embedded engines (node-llama-cpp in a child process each), one slot each. */
export function perWorkerEmbedded(model: string, n: number, threads: number, ctxPerSlot: number): Promise<EngineSet> {
  return startEach('embedded per-worker', Array.from({ length: n }, () => embeddedFactory({
    name: 'embedded', model, options: { slots: '1', ctx: String(ctxPerSlot), threads: String(threads) },
  })));
}

async function startEach(mode: string, agents: Driver[]): Promise<EngineSet> {
  const set: EngineSet = {
    mode, agents,
    pids: () => agents.flatMap((a) => a.pids()),
    stop: async () => { await Promise.all(agents.map((a) => a.stop())); },
  };
  try {
    // Two at a time: loading is I/O plus a little CPU, and 2 cores are all there is.
    for (let i = 0; i < agents.length; i += 2) await Promise.all(agents.slice(i, i + 2).map((a) => a.start()));
  } catch (err) { await set.stop(); throw err; }
  return set;
}

/** One llama-server with N slots (continuous batching) and N client drivers on it (shared mode). */
export async function sharedServer(model: string, n: number, threads: number, ctxPerSlot: number, args = '', bin?: string): Promise<EngineSet> {
  const server = new LlamaServerDriver({
    name: 'llama-server', model, options: { slots: String(n), ctx: String(ctxPerSlot * n), threads: String(threads), ...(args ? { args } : {}), ...(bin ? { bin } : {}) },
  });
  await server.start();
  const agents = Array.from({ length: n }, () => new LlamaServerDriver({ name: 'llama-server', options: { url: server.url! } }));
  await Promise.all(agents.map((a) => a.start()));
  return { mode: 'shared', agents, pids: () => server.pids(), stop: () => server.stop() };
}

const PROMPTS = ['Once upon a time', 'The little dog', 'Tom and Lily went', 'One day a bird', 'The sun was', 'A girl named Sue'];

/** Bounds on a runLoad: a configuration that collapses (threads spinning against a busy machine) costs bounded time. */
export interface LoadBounds {
  /** Stop after this long (ms): requests in flight are cut off, their streamed pieces counted as tokens. */
  maxMs?: number;
  /** Checked every second with the tokens so far (whole requests plus pieces in flight): true stops the run as maxMs does. */
  stopIf?: (tokens: number, ms: number) => boolean;
}

/** Every agent runs `requests` generations of `maxTokens` back to back; all agents at once. */
export async function runLoad(set: EngineSet, requests: number, maxTokens: number, bounds: LoadBounds = {}): Promise<LoadResult & { cut_short?: boolean }> {
  const ttfts: number[] = [];
  let tokens = 0;
  const cpu = (): number => set.pids().reduce((a, pid) => { try { return a + cpuSeconds(pid); } catch { return a; } }, 0);
  const cpu0 = cpu();
  const t0 = performance.now();
  let retries = 0;
  let errors = 0;
  // Pieces streamed by requests still running: what a cut-off run counts of them.
  const inFlight = new Map<number, number>();
  const streamed = (): number => { let k = 0; for (const v of inFlight.values()) k += v; return k; };
  // A controller per agent: one signal shared by every agent's request in flight had N listeners on
  // it at once (MaxListenersExceededWarning past 10 agents); stopping aborts each.
  const acs = set.agents.map(() => new AbortController());
  let cut = false;
  const stop = (): void => { cut = true; for (const ac of acs) ac.abort(); };
  const timer = bounds.maxMs ? setTimeout(stop, bounds.maxMs) : undefined;
  const check = bounds.stopIf ? setInterval(() => {
    if (bounds.stopIf!(tokens + streamed(), performance.now() - t0)) stop();
  }, 1000) : undefined;
  await Promise.all(set.agents.map(async (d, ai) => {
    const ac = acs[ai]!;
    for (let r = 0; r < requests && !ac.signal.aborted; r++) {
      // A request that fails before its first token is retried (and counted): llama-server sometimes
      // closes a kept-alive connection just as a new request goes out on it.
      for (let attempt = 0; ; attempt++) {
        const start = performance.now();
        let first = true;
        inFlight.set(ai, 0);
        try {
          const g = d.chat(PROMPTS[(ai + r) % PROMPTS.length]!, { maxTokens, seed: ai * 1000 + r, temperature: 0.8, signal: ac.signal });
          let it = await g.next();
          while (!it.done) {
            if (it.value) inFlight.set(ai, (inFlight.get(ai) ?? 0) + 1);
            if (first && it.value) { ttfts.push(performance.now() - start); first = false; }
            it = await g.next();
          }
          // Cut off, a request may end without its count: its pieces stand in for it.
          tokens += (it.value && it.value.tokensOut) || (ac.signal.aborted ? inFlight.get(ai) ?? 0 : 0);
          inFlight.delete(ai);
          break;
        } catch (err) {
          if (ac.signal.aborted) break;
          inFlight.delete(ai);
          if (first && attempt < 2) { retries++; continue; }
          errors++;
          break;
        }
      }
    }
  }));
  clearTimeout(timer);
  clearInterval(check);
  if (cut) tokens += streamed();
  const wall = (performance.now() - t0) / 1000;
  const cpuUsed = cpu() - cpu0;
  return {
    retries, errors, engine_cpu_s: Math.round(cpuUsed * 100) / 100, tokens_per_cpu_s: cpuUsed > 0 ? Math.round(tokens / cpuUsed * 10) / 10 : 0,
    requests: requests * set.agents.length, tokens, wall_s: Math.round(wall * 100) / 100,
    tokens_per_s: Math.round(tokens / wall * 10) / 10,
    ttft_p50_ms: Math.round(quantile(ttfts, 0.5)), ttft_p99_ms: Math.round(quantile(ttfts, 0.99)),
    ...(cut ? { cut_short: true } : {}),
  };
}

/** PSS/RSS of the engine processes and of their mappings of the model file. */
export function measureMemory(set: EngineSet, model: string): MemoryResult {
  const pids = set.pids();
  let pss = 0; let rss = 0; let mpss = 0; let mrss = 0;
  for (const pid of pids) {
    const p = processMemory(pid);
    const m = fileMapping(pid, model);
    pss += p.pss; rss += p.rss; mpss += m.pss; mrss += m.rss;
  }
  return {
    engines: pids.length, total_pss_mb: mbOf(pss), pss_per_agent_mb: mbOf(pss / set.agents.length),
    total_rss_mb: mbOf(rss), model_pss_mb: mbOf(mpss), model_rss_mb: mbOf(mrss),
  };
}

/** N batched-driver agents on one fresh engine (its own directory), `threads` as `--driver-opt threads=` takes it. */
export async function batchedEngine(model: string, n: number, threads: string, ctxPerSlot: number, dir: string, more: Record<string, string> = {}): Promise<EngineSet & { agents: BatchedDriver[] }> {
  const agents = Array.from({ length: n }, () => new BatchedDriver({ name: 'batched', model, options: { dir, sequences: String(n), ctx: String(ctxPerSlot), threads, ...more } }));
  await Promise.all(agents.map((a) => a.start()));
  return {
    mode: `batched threads=${threads}`, agents,
    pids: () => { const p = agents[0]!.enginePid(); return p ? [p] : []; },
    stop: async () => {
      const pid = agents[0]!.enginePid();
      await Promise.all(agents.map((a) => a.stop()));
      // The engine idles out after its last client: wait for it, so the next run has the CPUs.
      for (let i = 0; pid && i < 200; i++) { try { process.kill(pid, 0); } catch { break; } await new Promise((r) => setTimeout(r, 50)); }
    },
  };
}

/**
 * A competing load: `k` processes that each keep a core busy (a bounded spin) for at most `ms`.
 * What a VPS with noisy neighbours, or a host running other work, gives the engine. Each runs in a
 * session of its own (`detached`: setsid): with the kernel's autogroup on (the default on desktop and
 * many server kernels) a session is one scheduling entity, so k busy processes in the bench's session
 * would weigh as one neighbour, not k. A detached spinner outlives a killed bench, so each also ends
 * once its parent is gone.
 */
export function busyLoad(k: number, ms: number): { stop(): void; pids: number[] } {
  const spin = `const end = Date.now() + ${ms}, parent = process.ppid; for (let i = 0; Date.now() < end; i++) if ((i & 0xfffff) === 0 && process.ppid !== parent) break;`;
  const kids = Array.from({ length: k }, () => spawn(process.execPath, ['-e', spin], { stdio: 'ignore', detached: true }));
  for (const c of kids) c.unref();
  return {
    pids: kids.flatMap((c) => (c.pid ? [c.pid] : [])),
    stop: () => { for (const c of kids) c.kill('SIGKILL'); },
  };
}

/**
 * Every agent generates back to back until `ms` have passed (then its generation is cut short):
 * tokens per second over a fixed time, so a configuration that collapses costs the bench no more
 * time than one that runs well.
 */
export async function runFor(set: EngineSet, ms: number, maxTokens: number): Promise<{ tokens: number; wall_s: number; tokens_per_s: number; requests: number }> {
  // A controller per agent, as in runLoad: one shared signal had a listener per request in flight.
  const acs = set.agents.map(() => new AbortController());
  const timer = setTimeout(() => { for (const ac of acs) ac.abort(); }, ms);
  let tokens = 0;
  let requests = 0;
  const t0 = performance.now();
  await Promise.all(set.agents.map(async (d, ai) => {
    const ac = acs[ai]!;
    for (let r = 0; !ac.signal.aborted; r++) {
      try {
        const g = d.chat(PROMPTS[(ai + r) % PROMPTS.length]!, { maxTokens, seed: ai * 1000 + r, temperature: 0.8, signal: ac.signal });
        let it = await g.next();
        while (!it.done) it = await g.next();
        tokens += (it.value && it.value.tokensOut) || 0;
        requests++;
      } catch { if (!ac.signal.aborted) await new Promise((res) => setTimeout(res, 50)); }
    }
  }));
  clearTimeout(timer);
  const wall = (performance.now() - t0) / 1000;
  return { tokens, requests, wall_s: Math.round(wall * 100) / 100, tokens_per_s: Math.round(tokens / wall * 10) / 10 };
}
