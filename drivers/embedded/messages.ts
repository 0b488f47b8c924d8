/**
 * The NDJSON messages between the embedded driver and its engine host (one JSON object per line on
 * the host's stdin and stdout). The host's stderr is free text (logs), kept for error messages.
 */

/** What the host is started with (its last command-line argument, as JSON). */
export interface HostConfig {
  model: string; threads: number; ctx: number; slots: number;
  /** `auto` (or absent): the batched engine's rule (drivers/batched/flash-attn.ts), for a KV stream per slot. */
  flashAttn?: 'auto' | 'on' | 'off';
}

/** Generation settings of one chat, as sent to the host. */
export interface HostChatOptions {
  maxTokens?: number;
  temperature?: number;
  seed?: number;
  stop?: string[];
  grammar?: string;
  jsonSchema?: Record<string, unknown>;
}

/** Driver to host. */
export type ToHost =
  | { t: 'chat'; id: number; prompt: string; opts: HostChatOptions }
  | { t: 'abort'; id: number };

/** Host to driver. */
export type FromHost =
  /** `load`: how node-llama-cpp's binding was loaded (load-llama.ts). */
  | { t: 'ready'; ms: { boot: number; llama: number; model: number; context: number }; ctx: number; load: 'prebuilt-direct' | 'getLlama' | 'self-built'; flashAttn?: { on: boolean; why: string };
    /** After a SIGILL on this CPU: what it loads instead of its first choice (addon-variant.ts describeChoice). */
    fallback?: string }
  /** `stage`: loading the llama.cpp binding, or the model and its context. */
  | { t: 'fatal'; stage: 'binding' | 'model'; message: string }
  | { t: 'chunk'; id: number; text: string }
  | { t: 'done'; id: number; tokensIn: number; tokensOut: number; reason: string }
  | { t: 'error'; id: number; code: string; message: string };
