import type { Logger } from 'pino';
import { createDriver, killAllChildren, type DriverConfig } from '../drivers/index.js';
import { Agent, type AgentOptions } from './agent.js';
import type { AgentFailoverOptions } from './failover-agent.js';
import { FailoverStatusWriter } from './failover-status.js';
import { handshakeCaps } from './prompt-cache.js';

/** What every agent of the pool shares (AgentOptions), plus the pool's own settings. */
export interface PoolOptions extends Pick<AgentOptions, 'locate' | 'token' | 'role' | 'caps' | 'slots' | 'msgpack' | 'config'> {
  /** Worker ids; one agent (one hub connection) per id. */
  ids: string[];
  /** Each id's own credential (`swarm credential ID`), where it is not `token`. */
  tokens?: Record<string, string>;
  driver: DriverConfig;
  /** Hybrid star-gossip failover for every agent (each gets its own peer port). */
  failover?: Omit<AgentFailoverOptions, 'advertise'> & { ports?: number[]; advertise?: string[] };
  /** With failover: write the agents' failover status here every second (for `swarm status`). */
  statusFile?: string;
}

/**
 * Runs one or more agents in this process (`swarm worker --count K`). Resolves when every agent
 * has stopped (KILL from the hub, or stop()).
 */
export class WorkerPool {
  readonly agents: Agent[];
  private readonly done: Promise<string[]>;
  private readonly status?: FailoverStatusWriter;

  constructor(opts: PoolOptions, log: Logger) {
    const stopped: Promise<string>[] = [];
    const caps = handshakeCaps(opts.caps, opts.driver);
    this.agents = opts.ids.map((id, i) => {
      let resolve!: (reason: string) => void;
      stopped.push(new Promise<string>((r) => (resolve = r)));
      return new Agent({
        id, driver: createDriver(opts.driver), locate: opts.locate, token: opts.tokens && Object.hasOwn(opts.tokens, id) ? opts.tokens[id] : opts.token, role: opts.role,
        caps, slots: opts.slots, msgpack: opts.msgpack, config: opts.config, onStopped: resolve,
        failover: opts.failover && {
          ...opts.failover,
          port: opts.failover.ports?.[i] ?? (opts.failover.port ? opts.failover.port + i : 0),
          advertise: opts.failover.advertise?.[i],
        },
      }, log.child({ worker: id }));
    });
    this.done = Promise.all(stopped);
    if (opts.failover && opts.statusFile) this.status = new FailoverStatusWriter(opts.statusFile, this.agents, log);
  }

  /** Start all agents; resolves with their stop reasons when all have stopped. */
  async run(): Promise<string[]> {
    for (const a of this.agents) void a.run();
    this.status?.start();
    const reasons = await this.done;
    this.status?.stop();
    killAllChildren();
    return reasons;
  }

  async stop(reason: string): Promise<void> {
    await Promise.all(this.agents.map((a) => a.stop(reason)));
    this.status?.stop();
    killAllChildren();
  }
}
