import { driverOptions } from '../options.js';
import type { FlashAttnSetting } from './flash-attn.js';
import type { KvUnifiedSetting } from './kv-layout.js';

/** Settings of the batched driver, from `--driver-opt k=v` (DriverConfig.options). */
export interface BatchedOptions {
  /**
   * Threads of the one engine. `auto` (the default): the engine starts with the CPUs free when it
   * starts and then picks the count by measuring its decode steps (threads.ts), because threads that
   * spin at llama.cpp's barriers collapse when another process takes a core (two threads at load 7-11
   * on 2 cores: 2.5-5.5 tokens/s where one gave 972), while on a quiet machine every core helps (110M
   * shape, 2 cores: 1.4-1.6x the tokens/s of one thread at 8 and 25 agents). A number fixes it.
   */
  threads: number | 'auto';
  /** Context tokens per sequence. */
  ctx: number;
  /** Sequences the engine holds (`swarm up` passes agents × slots); connections beyond wait. */
  sequences: number;
  /** Where the engine's socket, lock, pid and log files live (`swarm worker` passes its state dir). */
  dir: string | undefined;
  startTimeoutMs: number;
  /** The engine exits this long after its last worker left. */
  idleMs: number;
  /**
   * How long a worker waits for a sequence when all are taken (0: for ever). After it, starting the
   * driver fails with ENGINE_START, which hands a task back without using an attempt: a worker
   * started beside a full engine must not sit on a task until its lease runs out.
   */
  seqWaitMs: number;
  /**
   * Keep a sequence's tokens between chats, so a prompt that starts like the last one evaluates only
   * the rest (default). `prefix_cache=0` evaluates every prompt whole: the baseline of the reuse bench.
   */
  prefixCache: boolean;
  /**
   * One KV cache shared by all sequences (llama.cpp's kv_unified), when the self-built addon is there
   * (`swarm engine build --addon`); the prebuilt addon cannot, and ignores it. `kv_unified=0` keeps a
   * stream per sequence; `auto` (the default) decides from the model's shape, sequences and ctx (kv-layout.ts).
   */
  kvUnified: KvUnifiedSetting;
  /**
   * Evaluate a short uncached prompt tail as 64 tokens where that is cheaper (prefix.ts, evalStart);
   * `tail_widen=0` evaluates just the tail: the baseline of the share bench.
   */
  tailWiden: boolean;
  /**
   * Flash attention for the engine's context (llama.cpp fixes it per context). `auto` (the default)
   * decides from the model's head size, the CPU's vector width and the KV layout (flash-attn.ts): off
   * where ggml's per-row kernel, which every generated token takes, would run scalar (synth 15M,
   * stories260K) unless a unified KV cache holds more than 4 sequences of more than 16,384 cells in
   * all (sequences x ctx), on where it is vectorized
   * (heads of 64). A short prompt tail is widened only while it is on.
   */
  flashAttn: FlashAttnSetting;
  /**
   * The decode loop: `direct` steps all sequences in one batch straight on node-llama-cpp's native
   * context (step-loop.ts); `library` runs node-llama-cpp's completion per sequence.
   */
  loop: 'direct' | 'library';
}

/** Validate the string options of DriverConfig into typed settings. */
export function parseBatchedOptions(raw: Record<string, string>): BatchedOptions {
  const o = driverOptions<'batched'>('batched', raw);
  return {
    threads: o.threads === 'auto' ? 'auto' : Number(o.threads),
    ctx: o.ctx,
    sequences: o.sequences,
    dir: o.dir || process.env.SWARM_ENGINE_DIR || undefined,
    startTimeoutMs: o.start_timeout_ms,
    idleMs: o.idle_ms,
    seqWaitMs: o.seq_wait_ms,
    prefixCache: o.prefix_cache === '1' || o.prefix_cache === 'true',
    kvUnified: o.kv_unified === 'auto' ? 'auto' : o.kv_unified === '1' || o.kv_unified === 'true',
    tailWiden: o.tail_widen === '1' || o.tail_widen === 'true',
    flashAttn: o.flash_attn,
    loop: o.loop,
  };
}
