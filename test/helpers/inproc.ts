import pino from 'pino';
import { ControlServer, Hub, hubConfig } from '../../hub/index.js';
import { WorkerPool } from '../../worker/index.js';
import type { WorkerConfig } from '../../worker/config.js';

export const quiet = pino({ level: process.env.SWARM_TEST_LOG ?? 'silent' });

/** A hub in this process on 127.0.0.1:0. */
export async function startHub(over: Partial<Parameters<typeof hubConfig>[0]> = {}) {
  const hub = new Hub(hubConfig({ port: 0, fsyncMs: 0, ...over }), quiet);
  const addr = await hub.start();
  return { hub, addr, stop: () => hub.stop({ killWorkers: true, graceMs: 1000 }) };
}

/** A hub in this process with its control API on 127.0.0.1:0; both stop at the test's end. */
export async function startControlled(t: { teardown(fn: () => Promise<void>): void }, over: Partial<Parameters<typeof hubConfig>[0]> = {}) {
  const h = await startHub(over);
  const control = new ControlServer(h.hub, { host: '127.0.0.1', port: 0 }, quiet);
  const { port } = await control.start();
  t.teardown(async () => { await control.stop(); await h.stop(); });
  return { ...h, control, port };
}

/** K agents in this process connected to `addr`. */
export function startPool(addr: { host: string; port: number }, k: number, o: { driver?: string; model?: string; options?: Record<string, string>; token?: string; slots?: number; prefix?: string; role?: string; caps?: string[]; config?: WorkerConfig } = {}) {
  const pool = new WorkerPool({
    ids: Array.from({ length: k }, (_, i) => `${o.prefix ?? 'w'}-${i + 1}`),
    driver: { name: o.driver ?? 'echo', options: o.options ?? {}, ...(o.model ? { model: o.model } : {}) },
    locate: async () => addr, token: o.token, slots: o.slots, role: o.role, caps: o.caps, config: o.config,
  }, quiet);
  const done = pool.run();
  return { pool, done, stop: () => pool.stop('test over') };
}

/** Resolve once `n` workers are registered with the hub (bounded). */
export async function waitWorkers(hub: Hub, n: number, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (hub.registry.size < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return hub.registry.size >= n;
}

/** Resolve once every task is done or failed (bounded). */
export async function waitTasks(hub: Hub, total: number, ms = 30_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  const finished = () => { const c = hub.store.queue.counts(); return c.done + c.failed; };
  while (finished() < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return finished() >= total;
}

/**
 * Lease and complete up to `n` queued tasks of role `x` as a worker that is not there (`ghost`),
 * straight on the store; the ids finished (fewer than `n` once none is left to lease).
 */
export async function finishAsGhost(hub: Hub, n: number): Promise<string[]> {
  const done: string[] = [];
  for (let k = 0; k < n; k++) {
    const rec = hub.store.lease({ id: 'ghost', role: 'x', caps: [] });
    if (!rec) break;
    await hub.store.complete(rec.id, { text: `echo: ${rec.spec.prompt}`, worker: 'ghost', attempt: rec.attempts });
    done.push(rec.id);
  }
  return done;
}
