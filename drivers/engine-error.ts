import { SwarmError } from '../protocol/index.js';

/**
 * An engine that cannot start however often it is tried: its model (or llama.cpp's binding) does not
 * load. The task is not at fault, but handing it to the next worker helps no more than retrying here,
 * as every worker of a swarm loads the same file: the task fails at once with this message.
 */
export class EngineLoadError extends SwarmError {
  readonly permanent = true;
  constructor(message: string) {
    super('SWARM_ERR_ENGINE_START', message);
  }
}

/** Is `err` an engine failure that no retry cures (EngineLoadError, or one that crossed a process boundary as such)? */
export function isPermanentEngineError(err: unknown): boolean {
  return err instanceof EngineLoadError || (err as { permanent?: unknown } | null)?.permanent === true;
}
