import { SwarmError } from '../protocol/index.js';
import type { AheadTicket, ChatOptions, ChatStats, Driver, DriverConfig } from './types.js';
import { echoFactory } from './echo/index.js';
import { execFactory } from './exec/index.js';
import { simulatedFactory } from './simulated/index.js';

/** Makes a driver from its settings; validates them (SWARM_ERR_CONFIG on a bad option). */
export type DriverFactory = (config: DriverConfig) => Driver;

const factories = new Map<string, DriverFactory>([
  ['echo', echoFactory],
  ['exec', execFactory],
  ['simulated', simulatedFactory],
]);

/**
 * The engine drivers load on first use: a worker process loads only its own driver (25 echo workers
 * starting at once on two cores should not each load four llama.cpp drivers they never run).
 */
const lazy = new Map<string, () => Promise<DriverFactory>>([
  ['llama-server', async () => (await import('./llama-server/index.js')).llamaServerFactory],
  ['llama-cli', async () => (await import('./llama-cli/index.js')).llamaCliFactory],
  ['embedded', async () => (await import('./embedded/index.js')).embeddedFactory],
  ['batched', async () => (await import('./batched/index.js')).batchedFactory],
  ['ollama', async () => (await import('./ollama/index.js')).ollamaFactory],
]);

/** Names of the drivers this build knows. */
export function driverNames(): string[] { return [...new Set([...factories.keys(), ...lazy.keys()])]; }

/** Add a driver (used by drivers that register themselves, and by tests). */
export function registerDriver(name: string, f: DriverFactory): void { factories.set(name, f); lazy.delete(name); }

/** Load a driver's code now, so that createDriver() checks its options at once (the CLI does this). */
export async function loadDriver(name: string): Promise<void> {
  const load = lazy.get(name);
  if (load && !factories.has(name)) registerDriver(name, await load());
}

/**
 * Create the driver named in `config`. A driver whose code is not loaded yet (see loadDriver) is
 * created behind a stand-in that loads it in start(), and its options are checked then.
 */
export function createDriver(config: DriverConfig): Driver {
  const f = factories.get(config.name);
  if (f) return f(config);
  const load = lazy.get(config.name);
  if (!load) throw new SwarmError('SWARM_ERR_CONFIG', `unknown driver "${config.name}" (known: ${driverNames().join(', ')})`);
  return new DeferredDriver(config, load);
}

/** A driver whose module is imported when it is started. */
class DeferredDriver implements Driver {
  private real?: Driver;
  private loading?: Promise<Driver>;
  private stopped = false;
  constructor(private readonly config: DriverConfig, private readonly load: () => Promise<DriverFactory>) {}
  get name(): string { return this.config.name; }
  private driver(): Promise<Driver> {
    this.loading ??= this.load().then((f) => (this.real = f(this.config)));
    return this.loading;
  }
  async start(): Promise<void> {
    const d = await this.driver();
    if (!this.stopped) await d.start(); // stop() came while the code loaded: start no engine
  }
  async *chat(prompt: string, opts: ChatOptions): AsyncGenerator<string, ChatStats | void, void> {
    return yield* (await this.driver()).chat(prompt, opts);
  }
  async stop(): Promise<void> { this.stopped = true; await this.real?.stop(); }
  pids(): number[] { return this.real?.pids() ?? []; }
  // What the real driver offers beyond chat, once its code is loaded (before: as a driver without it).
  get tellsEnd(): boolean { return this.real?.tellsEnd === true; }
  chatAhead(prompt: string, opts: ChatOptions): AheadTicket | undefined { return this.real?.chatAhead?.(prompt, opts); }
  withdrawAhead(ticket: AheadTicket): void { this.real?.withdrawAhead?.(ticket); }
}
