import type { Logger } from 'pino';
import { createDriver, killAllChildren, type DriverConfig } from '../drivers/index.js';
import { Agent } from './agent.js';
import type { HubLocator } from './client.js';

export interface PoolOptions {
  /** Worker ids; one agent (one hub connection) per id. */
  ids: string[];
  driver: DriverConfig;
  locate: HubLocator;
  token?: string;
  role?: string;
  caps?: string[];
  slots?: number;
  msgpack?: boolean;
}

/**
 * Runs one or more agents in this process (`swarm worker --count K`). Resolves when every agent
 * has stopped (KILL from the hub, or stop()).
 */
export class WorkerPool {
  readonly agents: Agent[];
  private readonly done: Promise<string[]>;

  constructor(opts: PoolOptions, log: Logger) {
    const stopped: Promise<string>[] = [];
    this.agents = opts.ids.map((id) => {
      let resolve!: (reason: string) => void;
      stopped.push(new Promise<string>((r) => (resolve = r)));
      return new Agent({
        id, driver: createDriver(opts.driver), locate: opts.locate, token: opts.token, role: opts.role,
        caps: opts.caps, slots: opts.slots, msgpack: opts.msgpack, onStopped: resolve,
      }, log.child({ worker: id }));
    });
    this.done = Promise.all(stopped);
  }

  /** Start all agents; resolves with their stop reasons when all have stopped. */
  async run(): Promise<string[]> {
    for (const a of this.agents) void a.run();
    const reasons = await this.done;
    killAllChildren();
    return reasons;
  }

  async stop(reason: string): Promise<void> {
    await Promise.all(this.agents.map((a) => a.stop(reason)));
    killAllChildren();
  }
}
