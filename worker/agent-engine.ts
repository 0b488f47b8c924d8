import type { Logger } from 'pino';
import { SwarmError } from '../protocol/index.js';
import { isPermanentEngineError, type Driver } from '../drivers/index.js';

/** The engine as HANDSHAKE and HEARTBEAT report it (`swarm up` waits for `ready`; `swarm status` shows a failure). */
export type EngineState = 'starting' | 'ready' | 'failed';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * An agent's engine: started when the agent spawns, tried again before a task after a failure that
 * may pass, restarted after a loop. It never throws from a start: a failure is kept (`error`) and
 * reported, and the next task learns of it from ready().
 */
export class AgentEngine {
  state: EngineState = 'starting';
  /** Why the engine last failed to start (cleared by a start that succeeds). */
  error?: unknown;
  private starting?: Promise<void>;
  private stopped = false;

  /** `changed`: the state was set (the agent tells the hub at once, not at the next heartbeat). */
  constructor(private readonly driver: Driver, private readonly log: Logger, private readonly changed: (s: EngineState) => void) {}

  /**
   * Start the engine. `retries`: a failure that may pass (an engine killed while it loaded, a port
   * taken) is tried again this many times, a moment apart, before the engine counts as failed: a
   * crash while `swarm up` waits should not fail the whole swarm. A model that does not load is not.
   */
  start(retries = 0): Promise<void> {
    this.error = undefined;
    this.starting = this.attempt(retries);
    return this.starting;
  }

  private async attempt(retries: number): Promise<void> {
    for (let n = 0; ; n++) {
      try {
        await this.driver.start();
        this.set('ready');
        return;
      } catch (err) {
        if (n < retries && !this.stopped && !isPermanentEngineError(err)) {
          this.log.warn({ err }, 'engine failed to start; trying again');
          await sleep(RETRY_MS * (n + 1));
          continue;
        }
        this.error = err ?? new Error('engine failed to start');
        this.log.error({ err }, 'engine failed to start');
        this.set('failed');
        return;
      }
    }
  }

  private set(s: EngineState): void {
    this.state = s;
    this.changed(s);
  }

  /**
   * Before a task: wait for a start under way. An engine that failed to start is tried once more; if
   * it fails again the task is not at fault, and ENGINE_START gives it back without using an attempt.
   * A model that does not load will not load now either: the task fails with its message.
   */
  async ready(): Promise<void> {
    if (this.starting) await this.starting;
    if (this.error === undefined) return;
    if (!isPermanentEngineError(this.error)) await this.start();
    const err = this.error;
    if (err === undefined) return;
    if (isPermanentEngineError(err)) throw err;
    throw new SwarmError('SWARM_ERR_ENGINE_START', `engine failed to start: ${this.message()}`);
  }

  /** After a loop: SIGTERM the engine (spec 10.2); the next task waits for the new one. */
  async restart(): Promise<void> {
    await this.driver.stop().catch(() => {});
    void this.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.driver.stop().catch(() => {});
  }

  /** HEARTBEAT `engine_fallback`: what the engine runs instead of its first choice (a SIGILL on this CPU), when it does. */
  fallback(): { engine_fallback?: string } {
    const f = this.driver.fallback?.();
    return f ? { engine_fallback: f.slice(0, 1024) } : {};
  }

  message(): string { return (this.error as Error)?.message ?? String(this.error); }
}

/** The first retry of a failed start waits this long, the next twice as long. */
const RETRY_MS = 500;
