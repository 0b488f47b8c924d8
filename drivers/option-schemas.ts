import { z } from 'zod';
import { DEFAULT_LOOP } from './batched/messages.js';

/**
 * Each driver's `--driver-opt key=value` settings: the one definition. protocol/gen-validators.ts
 * compiles it into drivers/option-checks.gen.js (values arrive as text and are converted to the
 * numbers these say), and the help of `swarm up` and `swarm worker` lists the keys from it. Checked
 * once, when a driver is made; what follows from other settings (a context per slot, an env
 * fallback) stays in each driver's options.ts.
 */
const int = (min: number) => z.number().int().min(min);
/** ggml runs at most 512 threads (GGML_MAX_N_THREADS); a larger count is a typo, refused before any engine starts. */
export const MAX_THREADS = 512;
const threads = () => int(1).max(MAX_THREADS);
/** 1..max as decimal text without a leading zero (for an option that is a count or a word). */
export function upTo(max: number): string {
  const m = String(max);
  const alts = m.length > 1 ? [`[1-9][0-9]{0,${m.length - 2}}`] : [];
  // As many digits as max: its first i digits, then a smaller one, then any.
  for (let i = 0; i < m.length; i++) {
    const lo = i === 0 ? 1 : 0, hi = Number(m[i]) - 1;
    if (hi >= lo) alts.push(`${m.slice(0, i)}${lo === hi ? lo : `[${lo}-${hi}]`}${i < m.length - 1 ? `[0-9]{${m.length - i - 1}}` : ''}`);
  }
  return [...alts, m].join('|');
}
const ms = (min: number, dflt: number) => int(min).default(dflt);
const text = (title: string) => z.string().meta({ title });
const flag = (dflt: '0' | '1') => z.enum(['0', '1', 'true', 'false']).meta({ title: '0|1' }).default(dflt);
/** Keys of the per-worker engine that mean nothing to the batched one: accepted, so `--engine` can switch freely. */
const unused = z.unknown().optional();

export const DriverOptionSchemas = {
  batched: z.object({
    /** `auto` (the default) picks the count by measuring decode steps (drivers/batched/threads.ts); a number fixes it. */
    threads: z.string().regex(new RegExp(`^(auto|${upTo(MAX_THREADS)})$`)).meta({ title: 'N|auto' }).default('auto'),
    /** Context tokens per sequence. */
    ctx: int(16).default(2048),
    /** Sequences the engine holds (`swarm up` passes agents x slots). */
    sequences: int(1).default(8),
    /** Where the engine's socket, lock, pid and log files live (default: env SWARM_ENGINE_DIR). */
    dir: text('PATH').optional(),
    start_timeout_ms: ms(100, 120_000),
    /** The engine exits this long after its last worker left. */
    idle_ms: ms(0, 2000),
    /** How long a worker waits for a free sequence (0: for ever). */
    seq_wait_ms: ms(0, 10_000),
    /** Keep a sequence's tokens between chats, so a prompt that starts like the last evaluates only the rest. */
    prefix_cache: flag('1'),
    /** One KV cache shared by all sequences, when the self-built addon is there (`swarm engine build --addon`); `auto` keeps a stream per sequence where flash attention's walk over a full unified cache would cost more than a quarter of a token's weights (drivers/batched/kv-layout.ts). */
    kv_unified: z.enum(['auto', '0', '1', 'true', 'false']).meta({ title: 'auto|0|1' }).default('auto'),
    /** Widen a short uncached prompt tail to 64 tokens where the model's shape makes that cheaper (0: evaluate just the tail). */
    tail_widen: flag('1'),
    /** Flash attention: `auto` turns it off where the CPU's kernel would run scalar for the model's head size, unless a unified KV cache holds more than 4 sequences and more than 16,384 cells (sequences x ctx; drivers/batched/flash-attn.ts). */
    flash_attn: z.enum(['auto', 'on', 'off']).meta({ title: 'auto|on|off' }).default('auto'),
    /** The engine's decode loop: its own, one step for all sequences (`direct`), or node-llama-cpp's completion per sequence (`library`). */
    loop: z.enum(['direct', 'library']).meta({ title: 'direct|library' }).default(DEFAULT_LOOP),
    slots: unused, stop_grace_ms: unused, download_stall_ms: unused,
  }).strict().describe('embedded, batched engine (the default)'),
  embedded: z.object({
    /** CPU threads for generation; 1 was faster than 2 on the 2-core test machine. */
    threads: threads().default(1),
    /** Context size in tokens (capped at the model's training context). */
    ctx: int(16).default(2048),
    /** Parallel sequences in the engine: chats beyond this wait for a free one. */
    slots: int(1).default(1),
    start_timeout_ms: ms(100, 60_000),
    stop_grace_ms: ms(0, 3000),
    /** An `hf:` download fails when no bytes arrive for this long. */
    download_stall_ms: ms(100, 30_000),
    /** Flash attention: `auto` decides as the batched engine does, for a KV stream per slot (off where the CPU's kernel would run scalar for the model's head size). */
    flash_attn: z.enum(['auto', 'on', 'off']).meta({ title: 'auto|on|off' }).default('auto'),
  }).strict().describe('embedded, --engine per-worker'),
  llamaServer: z.object({
    /** A running server to use; without it the driver starts its own. */
    url: text('URL').optional(),
    np: int(1).optional(),
    /** The server's slots (`np` is its other name). */
    slots: int(1).optional(),
    /** Tokens for all slots together (default 2048 per slot). */
    ctx: int(0).optional(),
    threads: threads().default(1),
    bin: text('PATH').optional(),
    /** More arguments for llama-server, split on spaces. */
    args: text('"…"').optional(),
    start_timeout_ms: ms(100, 120_000),
    stop_grace_ms: ms(0, 3000),
    slot: int(0).optional(),
  }).strict().describe('llama-server'),
  llamaCli: z.object({
    bin: text('PATH').optional(),
    ctx: int(0).default(4096),
    threads: threads().optional(),
    n_predict: int(1).default(512),
    transport: z.enum(['pipe', 'pty']).default('pipe'),
    /** What ends a turn in the output. */
    sentinel: text('TEXT').default('###END###'),
    args: text('"…"').optional(),
    start_timeout_ms: ms(100, 120_000),
    stop_grace_ms: ms(0, 3000),
  }).strict().describe('llama-cli'),
  ollama: z.object({
    /** The server (default: env OLLAMA_HOST, else http://127.0.0.1:11434). */
    host: text('URL').optional(),
    model: text('NAME').optional(),
    num_ctx: int(1).optional(),
    num_thread: int(1).optional(),
    keep_alive: text('DURATION').optional(),
    raw: z.enum(['0', '1', 'true', 'false', 'yes', 'no', 'on', 'off']).meta({ title: '0|1' }).default('0'),
    check_model: z.enum(['0', '1', 'true', 'false', 'yes', 'no', 'on', 'off']).meta({ title: '0|1' }).default('1'),
    start_timeout_ms: ms(100, 10_000),
  }).strict().describe('ollama'),
  echo: z.object({
    /** Wait this long before answering (a stand-in for prompt processing). */
    latency_ms: ms(0, 0),
    /** Stream the answer word by word, this long per word; 0 sends it in one chunk. */
    token_ms: ms(0, 0),
    /** Answer this instead of `echo: <prompt>`; `{prompt}` is replaced by the prompt. */
    reply: text('TEXT').optional(),
    /** Repeat the answer as a line forever (exercises the loop guard). */
    loop: flag('0'),
    /** Fail every task with SWARM_ERR_TASK_FAILED (exercises retries). */
    fail: flag('0'),
  }).strict().describe('echo'),
  exec: z.object({
    /** Run with /bin/sh; the prompt is on stdin and in $SWARM_PROMPT. */
    cmd: text('"…"').optional(),
    kill_grace_ms: ms(0, 2000),
    max_output: int(1).default(16 * 1024 * 1024),
  }).strict().describe('exec'),
  simulated: z.object({
    /** Probability that an answer is right. */
    p: z.number().min(0).max(1).default(0.6),
    /** Probability that an agent copies the item's shared draw instead of drawing its own. */
    dependence: z.number().min(0).max(1).default(0),
    latency_ms: ms(0, 0),
  }).strict().describe('simulated'),
};

/** A driver's settings once checked: numbers are numbers, defaults filled. */
export type DriverOptions<K extends keyof typeof DriverOptionSchemas> = z.output<(typeof DriverOptionSchemas)[K]>;
