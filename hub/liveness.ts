import { Type } from '../protocol/index.js';
import type { LivenessDeps } from './context.js';
import { Watchdog } from './watchdog.js';

/**
 * The hub's clock tick (every half heartbeat): heartbeats out, silent workers dropped, lapsed leases
 * back to the queue, and the dispatcher woken for anything that may have become runnable.
 */
export class Liveness {
  private readonly watchdog: Watchdog;

  constructor(private readonly hub: LivenessDeps) {
    this.watchdog = new Watchdog({ intervalMs: Math.max(100, Math.floor(hub.config.heartbeatMs / 2)), onTick: (now) => this.tick(now) });
  }

  start(): void { this.watchdog.start(); }
  stop(): void { this.watchdog.stop(); }

  private tick(now: number): void {
    const { registry, store, config, failover, sessions, dispatcher } = this.hub;
    const fo = failover.active ? { mode: failover.mode, holders: new Set(failover.holders()), keepers: new Set(failover.keeperIds()) } : undefined;
    const beat = fo ? { load: 0, status: 'hub', mode: fo.mode } : { load: 0, status: 'hub' };
    const holderBeat = { ...beat, holder: true };
    const keeperBeat = { ...beat, keeper: true };
    for (const w of [...registry.all()]) {
      if (now - w.lastSeen > config.deadAfterMs) sessions.drop(w, `silent for ${now - w.lastSeen} ms`);
      else w.conn.send(Type.HEARTBEAT, fo?.holders.has(w.id) ? holderBeat : fo?.keepers.has(w.id) ? keeperBeat : beat);
    }
    const expired = store.expireLeases();
    for (const rec of expired) for (const w of registry.all()) if (w.release(rec.id)) dispatcher.offer(w);
    // Lapsed leases wake it through the store's `requeued` events. After a journal write failed,
    // leasing was held back for a moment and nothing else wakes it.
    if (store.holding || store.queue.counts().queued) dispatcher.schedule();
    dispatcher.armReadyTimer();
  }
}
