/**
 * The NDJSON messages on the batched engine's Unix socket: one connection per worker sequence.
 * The engine greets a connection once it has a free sequence for it (`seq`); until then the
 * connection waits in line. A chat's events name the chat's id.
 */
import type { HostChatOptions } from '../embedded/messages.js';
import type { FlashAttnSetting } from './flash-attn.js';
import type { KvUnifiedSetting } from './kv-layout.js';

export type { HostChatOptions };

/** What the engine host is started with (its last command-line argument, as JSON). */
export interface EngineConfig {
  model: string;
  /** `auto`: chosen at start from the free CPUs, then by measurement (threads.ts). */
  threads: number | 'auto';
  /** Context tokens per sequence. */
  ctx: number;
  /** Sequences in the shared context: one per connected worker slot; more connections wait. */
  sequences: number;
  socket: string;
  /** Where the engine writes what it resolved at start (engine-info.ts). */
  info?: string;
  /** With no connection for this long, the engine exits (its workers are gone). */
  idleMs: number;
  /** Most connections waiting for a sequence; more are refused (bounded). */
  maxWaiting: number;
  /** false: every chat starts from an empty sequence (no prefix reuse). */
  prefixCache?: boolean;
  /** false: a KV stream per sequence even where the binding could unify them; true: unified; `auto` (or absent): kv-layout.ts decides. */
  kvUnified?: KvUnifiedSetting;
  /** false: a short prompt tail is evaluated as it is, never widened (the bench's baseline). */
  tailWiden?: boolean;
  /** Flash attention; `auto` (or absent) decides from the model's shape (flash-attn.ts). */
  flashAttn?: FlashAttnSetting;
  /** `direct`: the engine's own decode loop (step-loop.ts); `library`: node-llama-cpp's completion. */
  loop?: 'direct' | 'library';
}

/** Worker to engine. */
export type ToEngine =
  /** `stream: false`: text comes every 5 s or 16 lines (for the worker's loop guard) and the rest with `done`; else every ~40 ms. */
  | {
    t: 'chat'; id: number; prompt: string; opts: HostChatOptions; stream?: boolean;
    /** Send `ending` once this chat's tokens left, at its pace, take under this long (ms). */
    endsWithinMs?: number;
  }
  | { t: 'abort'; id: number };

/** Engine to worker. */
export type FromEngine =
  /** This connection owns sequence `seq` (of `of`) until it closes. */
  | { t: 'seq'; seq: number; of: number; ctx: number; pid: number }
  /** No sequence will come: too many connections wait already. */
  | { t: 'refused'; message: string }
  | { t: 'chunk'; id: number; text: string }
  /** The chat ends within the `endsWithinMs` it was sent with, by its tokens left and its pace. */
  | { t: 'ending'; id: number }
  /** `tokensCached`: prompt tokens the sequence already held (not evaluated again). */
  | { t: 'done'; id: number; tokensIn: number; tokensOut: number; tokensCached: number; reason: string; text?: string; ttftMs?: number }
  | { t: 'error'; id: number; code: string; message: string };

/** The decode loop an engine runs unless `--driver-opt loop=` says otherwise (drivers/option-schemas.ts). */
export const DEFAULT_LOOP: 'direct' | 'library' = 'direct';

/** Longest line either side accepts: a prompt travels in one line. */
export const MAX_LINE = 8 * 1024 * 1024;

/** The engine's exit code when its model (or llama.cpp's binding) does not load: no retry helps. */
export const LOAD_FAILED_EXIT = 78;
