/** Per-task generation options, taken from TASK_REQ. */
export interface ChatOptions {
  stop?: string[];
  maxTokens?: number;
  temperature?: number;
  seed?: number;
  grammar?: string;
  jsonSchema?: Record<string, unknown>;
  /** Cancels the generation; the driver stops producing chunks and returns. */
  signal?: AbortSignal;
  /** The chat was handed to the engine ahead (Driver.chatAhead): take that one over instead of sending it again. */
  ahead?: AheadTicket;
  /**
   * With `onEnding` (a driver that `tellsEnd`): call it once when the engine reckons this chat ends
   * within `endsWithinMs` (its tokens left at its pace), so the worker's next task can be on its way.
   */
  endsWithinMs?: number;
  onEnding?: () => void;
  /**
   * false: nobody reads the text as it is written, so a driver may hand it over in few, late pieces
   * (the batched engine: every 5 s or 16 lines, for the loop guard, and the rest at the end). Default true.
   */
  stream?: boolean;
}

/** A chat handed to the engine ahead of its turn (Driver.chatAhead); opaque to the worker. */
export interface AheadTicket { readonly ahead: number }

/** What a driver knows about one finished generation. */
export interface ChatStats {
  tokensIn?: number;
  tokensOut?: number;
  /** Prompt tokens the engine already held from an earlier prompt (prefix cache), not evaluated again. */
  tokensCached?: number;
  /** Time to the first token as the engine saw it (ms), where its text arrives later in bigger pieces. */
  ttftMs?: number;
}

/**
 * The driver interface of the spec, section 7.1. Drivers know nothing of the network.
 * `chat` yields text chunks and honours stop strings (the stop string itself is not yielded);
 * its return value carries token counts when the engine knows them.
 */
export interface Driver {
  readonly name: string;
  /** Start the engine subprocess, if any. Idempotent. */
  start(): Promise<void>;
  chat(prompt: string, opts: ChatOptions): AsyncGenerator<string, ChatStats | void, void>;
  /**
   * Optional: the whole answer now, when the driver has it without waiting for anything (no engine,
   * no delay): the chunks and stats `chat` would give for the same call, or undefined to use `chat`.
   * A short task then costs no async generator and no awaits per chunk. Throws what `chat` would.
   */
  answerNow?(prompt: string, opts: ChatOptions): { chunks: string[]; stats: ChatStats | void } | undefined;
  /** Stop the engine gracefully (SIGTERM, then SIGKILL after a grace period). Idempotent. */
  stop(): Promise<void>;
  /** Pids of engine processes this driver currently runs (for accounting and cleanup). */
  pids(): number[];
  /**
   * Optional: what the engine runs instead of its first choice, and why (a CPU variant hidden after a
   * SIGILL on this CPU); undefined when it runs what it would. The worker reports it (`swarm status`).
   */
  fallback?(): string | undefined;
  /**
   * Optional: hand the engine a chat now, to run the moment the chat running before it ends (a task
   * leased ahead into the worker's queue), so that its start costs no round trip through the worker.
   * The engine queues it unstarted; chat() with `opts.ahead` takes it over when the task starts (its
   * clock starts then), withdrawAhead() takes it back (the task is given back to the hub), and an
   * engine that has not started it then never does. Undefined: the driver cannot now (chat() sends it).
   */
  chatAhead?(prompt: string, opts: ChatOptions): AheadTicket | undefined;
  /** Its chats call ChatOptions.onEnding before they end (see there). */
  readonly tellsEnd?: boolean;
  withdrawAhead?(ticket: AheadTicket): void;
}

/** Settings a driver is created from. `options` are driver-specific (`--driver-opt k=v`). */
export interface DriverConfig {
  name: string;
  /** Model path for engine drivers. */
  model?: string;
  options: Record<string, string>;
}
