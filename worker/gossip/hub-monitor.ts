import { WORKER_DEFAULTS, withDefaults } from '../config.js';
import type { Logger } from 'pino';
import { realClock, pick, type Clock, type TimerHandle } from './clock.js';
import type { Membership } from './membership.js';
import { Suspicion } from './suspicion.js';
import { Quorum } from './quorum.js';

export type HubStatus = 'alive' | 'suspect' | 'dead';

/**
 * A link to the hub's port while it waits for its HANDSHAKE_ACK: `held` (accepted, unanswered: a
 * restarting hub replaying its journal), then `answered` (an ACK or an ERROR: the hub speaks),
 * `cut` (closed unanswered) or `timeout` (the ACK wait ran out).
 */
export type HubLinkState = 'held' | 'answered' | 'cut' | 'timeout';

export interface HubMonitorOptions {
  clock?: Clock;
  log?: Logger;
  /** Silence after which the hub is suspected (the spec's 3 s). */
  lapseMs?: number;
  /** Suspicion period bounds: max with no peer confirming, min once `askPeers` confirm (Lifeguard). */
  suspicionMinMs?: number;
  suspicionMaxMs?: number;
  /** Peers asked whether they still hear the hub. */
  askPeers?: number;
  /** A peer that heard the hub this recently vetoes the failover (> the hub's heartbeat interval). */
  vetoWithinMs?: number;
  /** Fail over only with a majority of the last known membership confirming (default true; worker/gossip/quorum.ts). */
  quorum?: boolean;
  rand?: () => number;
}

interface HubQuery { q: true }
interface HubAnswer { a: true; ago: number; dead: boolean }

const CH = 'hb';

/**
 * Decides when the hub is dead. Heartbeats lapsing for `lapseMs` only make the hub a suspect; then
 * a few peers are asked whether they hear it. A peer that does vetoes the failover (our own link is
 * the problem, and the client keeps reconnecting). Peers that do not hear it either confirm, which
 * shortens the suspicion period towards its minimum; with no answers it runs to its maximum. A hub
 * that is only starved of CPU, or stopped for less than lapse + suspicion, causes no failover.
 * Nor does a minority: the hub is declared dead only once a majority of the membership last seen
 * with the hub (this node included) confirms it (worker/gossip/quorum.ts); until then the suspect
 * asks every live peer again each lapse, and a member cut off from the rest waits for the hub.
 */
export class HubMonitor {
  private readonly clock: Clock;
  private status: HubStatus = 'alive';
  private lastHeard: number;
  private suspicion?: Suspicion;
  private timer?: TimerHandle;
  private vetoUntil = 0;
  private readonly listeners: ((s: HubStatus) => void)[] = [];
  readonly stats = { suspected: 0, vetoed: 0, declared: 0, noQuorum: 0 };
  private readonly quorum = new Quorum();
  /** The suspicion period ran out without a quorum: declared dead as soon as one confirms. */
  private awaitingQuorum = false;
  /** A link the hub's port accepted waits for its ACK: the hub is restarting, not gone (see `link`). */
  private holding = false;
  /** An ACK wait ran out: links held after it are not taken as the hub restarting until it speaks. */
  private holdSpent = false;

  /** Settings with defaults filled in (worker/config.ts); the veto window follows the lapse unless given. */
  private readonly cfg: typeof WORKER_DEFAULTS.hubMonitor;

  constructor(private readonly ms: Membership, private readonly opts: HubMonitorOptions = {}) {
    this.clock = opts.clock ?? realClock;
    const lapseMs = opts.lapseMs ?? WORKER_DEFAULTS.hubMonitor.lapseMs;
    this.cfg = withDefaults(WORKER_DEFAULTS.hubMonitor, { ...opts, lapseMs, vetoWithinMs: opts.vetoWithinMs ?? Math.floor(lapseMs / 2) });
    this.lastHeard = this.clock.now();
    this.quorum.observe(this.lastHeard, () => ms.live().length);
    ms.onApp(CH, (from, body) => this.onPeer(from, body as HubQuery | HubAnswer));
  }

  get state(): HubStatus { return this.status; }
  /** Milliseconds since the hub was last heard. */
  get silentFor(): number { return this.holding ? 0 : this.clock.now() - this.lastHeard; }

  onStatus(fn: (s: HubStatus) => void): void { this.listeners.push(fn); }

  /**
   * One timer, armed for the moment the hub's silence would reach the lapse; a heartbeat moves that
   * moment without touching the timer, which on firing re-arms for the new one. So an idle worker
   * wakes about once a lapse, not ten times a second (that loop was a third of failover's idle cost).
   */
  start(): void { this.arm(this.cfg.lapseMs); }

  private arm(ms: number): void {
    this.clock.clearTimeout(this.timer);
    this.timer = this.clock.setTimeout(() => this.fire(), Math.max(1, ms));
  }

  private fire(): void {
    const lapse = this.cfg.lapseMs;
    const now = this.clock.now();
    const due = Math.max(this.lastHeard + lapse, this.vetoUntil);
    if (this.holding) return this.arm(lapse);
    if (this.awaitingQuorum && this.status === 'suspect') this.ask(this.ms.live().filter((id) => id !== this.ms.id));
    if (this.status !== 'alive') return this.arm(lapse);
    if (now < due) return this.arm(due - now);
    this.check();
    this.arm(lapse);
  }

  stop(): void {
    this.clock.clearTimeout(this.timer);
    this.suspicion?.cancel();
    this.suspicion = undefined;
  }

  /**
   * The client's link to the hub's port, before its HANDSHAKE_ACK. A restarted hub binds its port
   * before it replays its journal and holds each link unread until then (hub/hub.ts): silence on a
   * held link is a hub restarting, and suspecting it there sent a swarm into gossip mode for a
   * replay of a few seconds, whose acting coordinator then stalled the rejoin. So while a link is
   * held the hub is not suspected (a suspicion under way is dropped) and peers asking are told it
   * is heard. The hub counts as silent again from before the hold once the link is cut unanswered
   * or the ACK wait runs out, so it fails over at once then; a port that stays closed never holds,
   * and fails over as before. After an ACK wait ran out, held links do not count until the hub speaks.
   */
  link(state: HubLinkState): void {
    if (state === 'answered') { this.holding = false; this.heard(); return; }
    if (state === 'held') {
      if (this.holdSpent || this.status === 'dead') return;
      this.holding = true;
      this.suspicion?.cancel();
      this.suspicion = undefined;
      this.awaitingQuorum = false;
      this.set('alive');
      return;
    }
    if (state === 'timeout') this.holdSpent = true;
    if (!this.holding) return;
    this.holding = false;
    this.arm(1);
  }

  /** Anything arrived from the hub (a heartbeat or any message). */
  heard(): void {
    this.holdSpent = false;
    this.lastHeard = this.clock.now();
    this.vetoUntil = 0;
    this.quorum.observe(this.lastHeard, () => this.ms.live().length);
    this.awaitingQuorum = false;
    if (this.status !== 'alive') {
      this.suspicion?.cancel();
      this.suspicion = undefined;
      this.set('alive');
    }
  }

  private check(): void {
    const now = this.clock.now();
    if (this.holding || this.status !== 'alive' || now - this.lastHeard < this.cfg.lapseMs || now < this.vetoUntil) return;
    this.stats.suspected++;
    this.set('suspect');
    const others = this.ms.live().filter((id) => id !== this.ms.id);
    const peers = pick(others, this.cfg.askPeers, this.opts.rand ?? Math.random);
    const min = this.cfg.suspicionMinMs;
    const max = this.cfg.suspicionMaxMs;
    this.quorum.reset();
    this.awaitingQuorum = false;
    // With nobody to ask there is no confirmation to wait for: k = 0 gives the minimum period.
    this.suspicion = new Suspicion(this.clock, this.ms.id, peers.length, min, max, () => {
      this.suspicion = undefined;
      if (!this.quorate()) {
        // A minority of the swarm does not fail over: the hub may be serving the rest. Keep asking.
        this.stats.noQuorum++;
        this.awaitingQuorum = true;
        this.opts.log?.warn({ confirmed: this.quorum.have, needed: this.quorum.needed, known: this.quorum.known }, 'hub unreachable, but no quorum of the swarm confirms it: not failing over');
        return;
      }
      this.declare();
    });
    // Every live peer is asked (the quorum counts their answers); the first `askPeers` shorten the suspicion.
    this.ask(others);
  }

  private ask(peers: string[]): void { for (const p of peers) this.ms.sendApp(p, CH, { q: true }); }

  private quorate(): boolean { return this.opts.quorum === false || this.quorum.met; }

  private declare(): void {
    this.awaitingQuorum = false;
    this.stats.declared++;
    this.set('dead');
  }

  private onPeer(from: string, m: HubQuery | HubAnswer): void {
    if (!m || typeof m !== 'object') return;
    if ('q' in m) {
      this.ms.sendApp(from, CH, { a: true, ago: this.silentFor, dead: this.status === 'dead' } satisfies HubAnswer);
      return;
    }
    if (!('a' in m) || this.status !== 'suspect') return;
    const within = this.cfg.vetoWithinMs;
    if (!m.dead && m.ago < within) {
      // Someone hears the hub now: it is alive and our own link is at fault. Ask again later.
      this.stats.vetoed++;
      this.suspicion?.cancel();
      this.suspicion = undefined;
      this.vetoUntil = this.clock.now() + within;
      this.set('alive');
      this.arm(within);
    } else {
      this.quorum.confirm(from);
      this.suspicion?.confirm(from);
      if (this.awaitingQuorum && this.quorate()) this.declare();
    }
  }

  private set(s: HubStatus): void {
    if (this.status === s) return;
    this.status = s;
    this.opts.log?.info({ hub: s, silentMs: this.silentFor }, 'hub status');
    for (const fn of this.listeners) fn(s);
  }
}
