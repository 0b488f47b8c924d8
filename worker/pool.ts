import type { Logger } from 'pino';
import { createDriver, killAllChildren, type DriverConfig } from '../drivers/index.js';
import { Agent, type AgentOptions } from './agent.js';
import type { AgentFailover, AgentFailoverOptions } from './failover-agent.js';
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
  /**
   * Start an agent the hub sent KILL again after this long, as a supervisor respawns a process of
   * one agent that exits: for a supervised process of several, whose other agents keep it alive.
   */
  restartKilledMs?: number;
}

/**
 * Runs one or more agents in this process (`swarm worker --count K`). Resolves when every agent
 * has stopped (KILL from the hub, or stop()).
 */
export class WorkerPool {
  /** The agents, by position of their id (an agent started again takes its predecessor's place). */
  readonly agents: Agent[];
  private readonly stoppedBy: Promise<string>[] = [];
  private readonly caps: string[];
  private readonly status?: FailoverStatusWriter;
  private stopping = false;
  /** The agents' failover sides: a TASK_REQ to one is answered from any of their replicas (AgentFailoverOptions.siblings). */
  private readonly siblings = new Set<AgentFailover>();

  constructor(private readonly opts: PoolOptions, private readonly log: Logger) {
    this.caps = handshakeCaps(opts.caps, opts.driver);
    this.agents = opts.ids.map((id, i) => this.make(id, i));
    if (opts.failover && opts.statusFile) this.status = new FailoverStatusWriter(opts.statusFile, this.agents, log);
  }

  /** Start all agents; resolves with their stop reasons when all have stopped. */
  async run(): Promise<string[]> {
    this.status?.start();
    const reasons = await Promise.all(this.agents.map((_, i) => this.keep(i)));
    this.status?.stop();
    killAllChildren();
    return reasons;
  }

  async stop(reason: string): Promise<void> {
    this.stopping = true;
    await Promise.all(this.agents.map((a) => a.stop(reason)));
    this.status?.stop();
    killAllChildren();
  }

  /** Run the agent at `i` (again, after a KILL, when asked to) until it stops for good. */
  private async keep(i: number): Promise<string> {
    for (;;) {
      const a = this.agents[i]!;
      void a.run();
      const reason = await this.stoppedBy[i]!;
      if (this.stopping || this.opts.restartKilledMs === undefined || !reason.startsWith('KILL')) return reason;
      this.log.info({ worker: this.opts.ids[i], reason, inMs: this.opts.restartKilledMs }, 'agent killed by the hub; starting it again');
      await new Promise((r) => setTimeout(r, this.opts.restartKilledMs));
      if (this.stopping) return reason;
      this.agents[i] = this.make(this.opts.ids[i]!, i);
    }
  }

  private make(id: string, i: number): Agent {
    const o = this.opts;
    let resolve!: (reason: string) => void;
    this.stoppedBy[i] = new Promise<string>((r) => (resolve = r));
    return new Agent({
      id, driver: createDriver(o.driver), locate: o.locate, token: o.tokens && Object.hasOwn(o.tokens, id) ? o.tokens[id] : o.token, role: o.role,
      caps: this.caps, slots: o.slots, msgpack: o.msgpack, config: o.config, onStopped: resolve,
      failover: o.failover && {
        ...o.failover,
        port: o.failover.ports?.[i] ?? (o.failover.port ? o.failover.port + i : 0),
        advertise: o.failover.advertise?.[i],
        siblings: this.siblings,
      },
    }, this.log.child({ worker: id }));
  }
}
