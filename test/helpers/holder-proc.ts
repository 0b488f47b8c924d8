import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { WorkerPool } from '../../worker/index.js';

/**
 * A failover agent in a process of its own (`node holder-proc.js ID PORT TOKEN`), which a hub on
 * 127.0.0.1:PORT elects a holder of its replicated state (one per process): its decoding and merging
 * then load another process, not the hub's. Asked over IPC, it tells what its replica holds.
 */

/** What a holder holds of one task: its state, and a digest of its spec and result text (undefined: none). */
export type Held = [state: string | undefined, spec: string | undefined, text: string | undefined];

/** JSON with every object's keys sorted: a replica's final entry is unpacked with its fields in another order. */
const stable = (x: unknown): string => {
  if (Array.isArray(x)) return `[${x.map(stable).join(',')}]`;
  if (x && typeof x === 'object') return `{${Object.keys(x).sort().filter((k) => (x as Record<string, unknown>)[k] !== undefined).map((k) => `${JSON.stringify(k)}:${stable((x as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(x);
};
const digest = (x: unknown) => (x === undefined ? undefined : createHash('sha1').update(stable(x)).digest('hex'));

/** The digests a hub's record is compared with (`Held`). */
export function heldOf(state: string, spec: unknown, text: string | undefined): Held { return [state, digest(spec), text === undefined ? undefined : digest(text)]; }

export class HolderProc {
  private constructor(readonly id: string, private readonly c: ChildProcess) {}

  static start(id: string, port: number, token: string): HolderProc {
    const c = spawn(process.execPath, [fileURLToPath(import.meta.url), id, String(port), token], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    return new HolderProc(id, c);
  }

  private ask<T>(m: unknown): Promise<T> {
    return new Promise((resolve, reject) => {
      const onExit = () => reject(new Error(`holder ${this.id} exited`));
      this.c.once('exit', onExit);
      this.c.once('message', (x) => { this.c.off('exit', onExit); resolve(x as T); });
      this.c.send(m as never);
    });
  }

  /** Tasks in its replica. */
  size(): Promise<number> { return this.ask<number>({ size: true }); }
  /** What it holds of each of `ids` (`Held`). */
  held(ids: readonly string[]): Promise<Held[]> { return this.ask<Held[]>({ ids }); }

  /** Stop its pool and wait for the process (killed if it takes more than 5 s). */
  async stop(): Promise<void> {
    if (this.c.exitCode !== null || this.c.signalCode !== null) return;
    const gone = new Promise((r) => this.c.once('exit', r));
    this.c.send({ stop: true });
    const t = setTimeout(() => this.c.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(t);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [, , id, port, token] = process.argv;
  const pool = new WorkerPool({ ids: [id!], driver: { name: 'echo', options: {} }, slots: 1, token, locate: async () => ({ host: '127.0.0.1', port: Number(port) }), failover: { host: '127.0.0.1', port: 0 } }, pino({ level: process.env.SWARM_TEST_LOG ?? 'silent' }));
  const running = pool.run();
  const replica = () => pool.agents[0]?.failover?.node.replica;
  process.on('message', (m: { size?: true; ids?: string[]; stop?: true }) => {
    if (m.size) process.send!(replica()?.size ?? 0);
    if (m.ids) process.send!(m.ids.map((id): Held => { const e = replica()?.get(id); return e ? [replica()!.state(id), digest(e.spec), digest(e.result?.text)] : [undefined, undefined, undefined]; }));
    if (m.stop) void pool.stop('test over').then(() => running).finally(() => process.exit(0));
  });
  process.on('disconnect', () => process.exit(0));
}
