// Over 300 lines on purpose: SWIM and Lifeguard are one state machine over one member table (probe, suspect, refute, rejoin).
import type { Logger } from 'pino';
import { realClock, pick, type Clock, type TimerHandle } from './clock.js';
import { BroadcastQueue } from './broadcast.js';
import { Suspicion } from './suspicion.js';
import { MemberState, type Change, type GossipMsg, type Piggy, type Transport, type YourView } from './messages.js';

/** Tunables; defaults follow memberlist's LAN profile scaled to one host. */
export interface MembershipConfig {
  probeIntervalMs: number;
  probeTimeoutMs: number;
  /** Peers asked to probe indirectly when a direct probe gets no ack. */
  indirectChecks: number;
  /** Suspicion min = mult * log10(n) * probeInterval; max = maxMult * min (Lifeguard). */
  suspicionMult: number;
  suspicionMaxMult: number;
  /** Each change rides on mult * ceil(log10(n+1)) messages. */
  retransmitMult: number;
  gossipIntervalMs: number;
  gossipNodes: number;
  /** Full membership exchange with one random peer (repairs lost broadcasts). */
  pushPullIntervalMs: number;
  /** How often a dead member is pinged, so a healed partition rejoins. */
  reconnectIntervalMs: number;
  maxPiggyItems: number;
  maxPiggyBytes: number;
  /** Lifeguard local health: timeouts stretch by (awareness+1) when we seem to be the slow one. */
  awarenessMax: number;
  /**
   * While relaxed (`setRelaxed(true)`: star mode, where the hub watches every worker), probe rounds and
   * full-state exchanges run this many times less often. Timeouts and suspicion bounds do not change.
   */
  relaxedMult: number;
}

export const defaultMembershipConfig: Readonly<MembershipConfig> = Object.freeze({
  probeIntervalMs: 1000, probeTimeoutMs: 400, indirectChecks: 3, suspicionMult: 4, suspicionMaxMult: 6,
  retransmitMult: 4, gossipIntervalMs: 200, gossipNodes: 3, pushPullIntervalMs: 5000, reconnectIntervalMs: 1000,
  maxPiggyItems: 16, maxPiggyBytes: 32 * 1024, awarenessMax: 8, relaxedMult: 4,
});

/** One member as this node sees it. */
export interface Member { id: string; addr: string; inc: number; state: MemberState; since: number }

/** A member changed state (joined as alive, became suspect, dead, or alive again). */
export interface MemberEvent { id: string; addr: string; state: MemberState; prev?: MemberState; inc: number }

export interface MembershipOptions {
  id: string;
  transport: Transport;
  clock?: Clock;
  rand?: () => number;
  config?: Partial<MembershipConfig>;
  log?: Logger;
}

interface Probe { onAck: () => void }

/**
 * SWIM membership with Lifeguard's refinements: round-robin probes, indirect probes through k
 * peers, suspicion with a timeout that shrinks as others confirm, incarnation numbers so a live
 * member refutes a suspicion, and every change piggy-backed on probe and gossip traffic. It owns the
 * transport and also carries the application's broadcasts (`broadcast`) and direct messages (`sendApp`).
 */
export class Membership {
  readonly id: string;
  readonly cfg: MembershipConfig;
  private inc = 0;
  private readonly clock: Clock;
  private readonly rand: () => number;
  private readonly members = new Map<string, Member>();
  private readonly suspicions = new Map<string, Suspicion>();
  private readonly probes = new Map<number, Probe>();
  private readonly memberQ: BroadcastQueue;
  private readonly userQ: BroadcastQueue;
  private readonly listeners: ((e: MemberEvent) => void)[] = [];
  private readonly userListeners: ((v: unknown, from: string, key: string) => boolean)[] = [];
  private readonly appHandlers = new Map<string, (from: string, body: unknown) => void>();
  private readonly timers = new Map<string, TimerHandle>();
  private order: string[] = [];
  private orderIdx = 0;
  private seq = 0;
  private awareness = 0;
  private running = false;
  private relaxed = false;
  private readonly seeds = new Set<string>();

  constructor(private readonly opts: MembershipOptions) {
    this.id = opts.id;
    this.cfg = { ...defaultMembershipConfig, ...opts.config };
    this.clock = opts.clock ?? realClock;
    this.rand = opts.rand ?? Math.random;
    const limit = () => this.cfg.retransmitMult * Math.max(1, Math.ceil(Math.log10(this.members.size + 2)));
    this.memberQ = new BroadcastQueue(limit);
    this.userQ = new BroadcastQueue(limit);
    opts.transport.onMessage((m) => this.handle(m));
  }

  get addr(): string { return this.opts.transport.addr; }
  get incarnation(): number { return this.inc; }
  get localHealth(): number { return this.awareness; }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop('probe', () => this.cfg.probeIntervalMs * (this.awareness + 1) * this.pace, () => this.probeRound());
    this.loop('pushpull', () => this.pushPullEvery() * this.pace, () => this.pushPull());
    // Gossip and reconnect rounds run only while there is something to spread or someone dead: an idle
    // member of 25 woke 6 times a second for nothing (the loops wake again on a push or a death).
    this.wake('gossip');
    this.wake('reconnect');
  }

  /**
   * Relaxed: probe and push-pull `relaxedMult` times less often. For star mode, where the hub already
   * hears every worker and the members' views matter only from a failover on; un-relaxing (the
   * failover) starts a probe round at once, so detection after a failover runs at the normal pace.
   */
  setRelaxed(relaxed: boolean): void {
    if (this.relaxed === relaxed) return;
    this.relaxed = relaxed;
    if (!this.running) return;
    // Restart the paced loops so the new period applies now, not after a relaxed period has run out.
    for (const name of ['probe', 'pushpull']) this.clock.clearTimeout(this.timers.get(name));
    this.loop('probe', () => this.cfg.probeIntervalMs * (this.awareness + 1) * this.pace, () => this.probeRound(), !relaxed);
    this.loop('pushpull', () => this.pushPullEvery() * this.pace, () => this.pushPull());
  }

  get isRelaxed(): boolean { return this.relaxed; }

  private get pace(): number { return this.relaxed ? Math.max(1, this.cfg.relaxedMult) : 1; }

  stop(): void {
    this.running = false;
    for (const t of this.timers.values()) this.clock.clearTimeout(t);
    this.timers.clear();
    for (const s of this.suspicions.values()) s.cancel();
    this.suspicions.clear();
  }

  /** Add a member we were told about (by the hub): alive at incarnation 0 unless known. */
  add(id: string, addr: string): void {
    if (id === this.id || this.members.has(id)) return;
    this.setMember({ id, addr, inc: 0, state: MemberState.ALIVE, since: this.clock.now() });
  }

  /** Exchange full membership with a seed address (the SWIM join). */
  join(addr: string): void {
    this.seeds.add(addr);
    this.send(addr, { t: 'state', members: this.snapshot(), reply: true });
  }

  /** Members other than this node. */
  list(): Member[] { return [...this.members.values()]; }
  get(id: string): Member | undefined { return this.members.get(id); }
  /** Ids of live members (alive or suspect) including this node, sorted. */
  live(): string[] {
    const out = [this.id];
    for (const m of this.members.values()) if (m.state !== MemberState.DEAD) out.push(m.id);
    return out.sort();
  }
  isLive(id: string): boolean { return id === this.id || (this.members.get(id)?.state ?? MemberState.DEAD) !== MemberState.DEAD; }

  onChange(fn: (e: MemberEvent) => void): void { this.listeners.push(fn); }

  /** Piggy-back `value` on outgoing traffic (~log n times); a newer value for `key` replaces it. */
  broadcast(key: string, value: unknown): void { this.enqueue(this.userQ, key, { k: key, v: value }); }
  /**
   * Receive broadcasts. A handler returns true when the value was news to it; the value is then
   * re-broadcast from here (infection-style spread), otherwise it dies out.
   */
  onBroadcast(fn: (v: unknown, from: string, key: string) => boolean): void { this.userListeners.push(fn); }

  /** Send an application message straight to a member (dropped if it is unknown). */
  sendApp(to: string, ch: string, body: unknown): boolean {
    if (to === this.id) {
      // To ourselves (the coordinator assigning itself a task): no network, but still asynchronous.
      queueMicrotask(() => { if (this.running) this.appHandlers.get(ch)?.(this.id, body); });
      return true;
    }
    const addr = this.members.get(to)?.addr;
    if (!addr) return false;
    this.send(addr, { t: 'app', ch, body });
    return true;
  }
  onApp(ch: string, fn: (from: string, body: unknown) => void): void { this.appHandlers.set(ch, fn); }

  /** Pending broadcasts, for tests and convergence checks. */
  get pendingBroadcasts(): number { return this.memberQ.size + this.userQ.size; }

  // ---- periodic work

  private loop(name: string, every: () => number, fn: () => void, now = false): void {
    const tick = () => {
      if (!this.running) return;
      this.timers.set(name, this.clock.setTimeout(tick, every()));
      fn();
    };
    // Jittered first tick so simulated members do not move in lock step.
    this.timers.set(name, this.clock.setTimeout(tick, now ? 0 : Math.floor(this.rand() * every())));
  }

  /**
   * Start an on-demand loop (`gossip`, `reconnect`) unless it runs: it ticks while it has work and
   * then stops (no timer at all while idle), and is woken again when work appears.
   */
  private wake(name: 'gossip' | 'reconnect'): void {
    if (!this.running || this.timers.has(name)) return;
    const every = name === 'gossip' ? this.cfg.gossipIntervalMs : this.cfg.reconnectIntervalMs;
    const busy = name === 'gossip' ? () => this.memberQ.size > 0 || this.userQ.size > 0 : () => this.list().some((m) => m.state === MemberState.DEAD);
    const run = name === 'gossip' ? () => this.gossipRound() : () => this.reconnect();
    if (!busy()) return;
    const tick = () => {
      this.timers.delete(name);
      if (!this.running || !busy()) return;
      this.timers.set(name, this.clock.setTimeout(tick, every));
      run();
    };
    // Jittered like the paced loops: members woken by the same event do not move in lock step.
    this.timers.set(name, this.clock.setTimeout(tick, Math.floor(this.rand() * every)));
  }

  private nextTarget(): Member | undefined {
    for (let tries = 0; tries < 2; tries++) {
      while (this.orderIdx < this.order.length) {
        const m = this.members.get(this.order[this.orderIdx++]!);
        if (m && m.state !== MemberState.DEAD) return m;
      }
      // Round-robin over a fresh shuffle each pass: every member is probed within one pass.
      this.order = pick([...this.members.keys()], this.members.size, this.rand);
      this.orderIdx = 0;
    }
    return undefined;
  }

  private probeRound(): void {
    const target = this.nextTarget();
    if (!target) return;
    const scale = this.awareness + 1;
    const seq = ++this.seq;
    let acked = false;
    let nacks = 0;
    let expected = 0;
    const timers: TimerHandle[] = [];
    this.probes.set(seq, {
      onAck: () => {
        if (acked) return;
        // The usual case: settle now and drop the timers (four timer wake-ups per probe otherwise).
        acked = true;
        for (const t of timers) this.clock.clearTimeout(t);
        this.probes.delete(seq); this.probes.delete(-seq);
        this.adjustAwareness(-1);
      },
    });
    this.probes.set(-seq, { onAck: () => { nacks++; } });
    this.send(target.addr, { t: 'ping', seq, to: target.id, pb: this.piggy(), yv: this.yourView(target) });
    timers.push(this.clock.setTimeout(() => timers.push(this.clock.setTimeout(() => {
      if (acked) return;
      const helpers = pick(this.list().filter((m) => m.state === MemberState.ALIVE && m.id !== target.id), this.cfg.indirectChecks, this.rand);
      expected = helpers.length;
      for (const h of helpers) this.send(h.addr, { t: 'ping-req', seq, target: target.id, ta: target.addr, pb: this.piggy() });
    }, 0)), this.cfg.probeTimeoutMs * scale));
    // Decide one turn later: when our own event loop lags, due timers run before pending socket
    // reads, and an ack sitting unread in the kernel must not count as silence.
    const decide = () => {
      if (acked) return;
      this.probes.delete(seq); this.probes.delete(-seq);
      // Lifeguard: missing nacks mean our own messages or timers are late; trust ourselves less.
      this.adjustAwareness(nacks < expected ? 1 : 0);
      const cur = this.members.get(target.id);
      if (cur && cur.state === MemberState.ALIVE && cur.inc === target.inc) {
        this.suspect({ id: cur.id, addr: cur.addr, inc: cur.inc, s: MemberState.SUSPECT, by: this.id });
      }
    };
    timers.push(this.clock.setTimeout(() => timers.push(this.clock.setTimeout(decide, 0)), this.cfg.probeIntervalMs * scale - 1));
  }

  private gossipRound(): void {
    if (this.memberQ.size === 0 && this.userQ.size === 0) return;
    const now = this.clock.now();
    // Recently dead members get gossip too, so they learn they were declared dead and can refute.
    const cands = this.list().filter((m) => m.state !== MemberState.DEAD || now - m.since < 10 * this.cfg.probeIntervalMs);
    for (const m of pick(cands, this.cfg.gossipNodes, this.rand)) {
      const pb = this.piggy();
      if (!pb.m && !pb.u) return;
      this.send(m.addr, { t: 'gossip', pb });
    }
  }

  /**
   * Full-state exchanges cost O(n) each and every member does them, so their interval grows with
   * the cluster past 32 members (memberlist's pushPullScale); otherwise they swamp a loaded host.
   */
  private pushPullEvery(): number {
    const n = this.members.size + 1;
    if (n <= 32) return this.cfg.pushPullIntervalMs;
    return this.cfg.pushPullIntervalMs * (Math.ceil(Math.log2(n) - Math.log2(32)) + 1);
  }

  private pushPull(): void {
    const cands = this.list().filter((m) => m.state === MemberState.ALIVE);
    const [m] = pick(cands, 1, this.rand);
    if (m) this.send(m.addr, { t: 'state', members: this.snapshot(), reply: true });
    // Alone (a join that was lost, or everyone we knew died): ask the seeds again.
    else for (const s of this.seeds) this.send(s, { t: 'state', members: this.snapshot(), reply: true });
  }

  private reconnect(): void {
    const [m] = pick(this.list().filter((x) => x.state === MemberState.DEAD), 1, this.rand);
    if (m) this.send(m.addr, { t: 'ping', seq: ++this.seq, to: m.id, pb: this.piggy(), yv: this.yourView(m) });
  }

  // ---- incoming

  private handle(msg: GossipMsg): void {
    if (!this.running || msg.from === this.id) return;
    if (!this.members.has(msg.from) && msg.t !== 'state') this.add(msg.from, msg.fa);
    if ('pb' in msg && msg.pb) this.mergePiggy(msg.pb, msg.from);
    if ('yv' in msg && msg.yv) this.maybeRefute(msg.yv);
    switch (msg.t) {
      case 'ping':
        if (msg.to !== this.id) return; // a stale address now used by someone else
        this.send(msg.fa, { t: 'ack', seq: msg.seq, pb: this.piggy(), yv: this.yourView(this.members.get(msg.from)) });
        return;
      case 'ack':
        this.probes.get(msg.seq)?.onAck();
        return;
      case 'nack':
        this.probes.get(-msg.seq)?.onAck();
        return;
      case 'ping-req': {
        const seq = ++this.seq;
        let done = false;
        const timer = this.clock.setTimeout(() => {
          this.probes.delete(seq);
          if (!done) this.send(msg.fa, { t: 'nack', seq: msg.seq });
        }, this.cfg.probeTimeoutMs);
        this.probes.set(seq, {
          onAck: () => {
            done = true; this.probes.delete(seq); this.clock.clearTimeout(timer);
            this.send(msg.fa, { t: 'ack', seq: msg.seq });
          },
        });
        this.send(msg.ta, { t: 'ping', seq, to: msg.target, pb: this.piggy() });
        return;
      }
      case 'gossip':
        return;
      case 'state':
        if (!this.members.has(msg.from)) this.add(msg.from, msg.fa);
        // Remote suspect and dead become suspect here (memberlist's rule): the member may refute.
        for (const c of msg.members) {
          if (c.s === MemberState.ALIVE) this.alive(c);
          else this.suspect({ ...c, s: MemberState.SUSPECT, by: msg.from });
        }
        if (msg.reply) this.send(msg.fa, { t: 'state', members: this.snapshot(), reply: false });
        return;
      case 'app':
        this.appHandlers.get(msg.ch)?.(msg.from, msg.body);
        return;
    }
  }

  private mergePiggy(pb: Piggy, from: string): void {
    for (const c of pb.m ?? []) this.apply(c);
    for (const item of pb.u ?? []) {
      const { k, v } = item as { k: string; v: unknown };
      if (typeof k !== 'string') continue;
      let news = false;
      for (const fn of this.userListeners) news = fn(v, from, k) || news;
      if (news) this.enqueue(this.userQ, k, item);
    }
  }

  private apply(c: Change): void {
    if (c.s === MemberState.ALIVE) this.alive(c);
    else if (c.s === MemberState.SUSPECT) this.suspect(c);
    else this.dead(c);
  }

  private alive(c: Change): void {
    if (c.id === this.id) {
      // Someone carries an incarnation of ours we do not remember (we restarted): jump past it.
      if (c.inc > this.inc) this.refute(c.inc);
      return;
    }
    const cur = this.members.get(c.id);
    if (cur && c.inc <= cur.inc) return;
    this.cancelSuspicion(c.id);
    this.setMember({ id: c.id, addr: c.addr, inc: c.inc, state: MemberState.ALIVE, since: this.clock.now() });
    this.enqueue(this.memberQ, `m:${c.id}`, { id: c.id, addr: c.addr, inc: c.inc, s: MemberState.ALIVE });
  }

  private suspect(c: Change): void {
    if (c.id === this.id) { if (c.inc >= this.inc) this.refute(c.inc); return; }
    const cur = this.members.get(c.id);
    if (!cur || c.inc < cur.inc || cur.state === MemberState.DEAD) return;
    if (cur.state === MemberState.SUSPECT && c.inc === cur.inc) {
      if (c.by && this.suspicions.get(c.id)?.confirm(c.by)) this.enqueue(this.memberQ, `m:${c.id}`, c);
      return;
    }
    this.setMember({ ...cur, inc: c.inc, state: MemberState.SUSPECT, since: this.clock.now() });
    this.enqueue(this.memberQ, `m:${c.id}`, { ...c, by: c.by ?? this.id });
    const n = this.members.size + 1;
    const k = n - 2 < this.cfg.suspicionMult - 2 ? 0 : this.cfg.suspicionMult - 2;
    const min = Math.max(this.cfg.probeIntervalMs, this.cfg.suspicionMult * Math.log10(Math.max(2, n)) * this.cfg.probeIntervalMs);
    const max = this.cfg.suspicionMaxMult * min;
    this.cancelSuspicion(c.id);
    this.suspicions.set(c.id, new Suspicion(this.clock, c.by ?? this.id, k, min, max, () => {
      this.suspicions.delete(c.id);
      const now = this.members.get(c.id);
      if (now && now.state === MemberState.SUSPECT && now.inc === c.inc) {
        this.dead({ id: c.id, addr: now.addr, inc: now.inc, s: MemberState.DEAD, by: this.id });
      }
    }));
  }

  private dead(c: Change): void {
    if (c.id === this.id) { if (c.inc >= this.inc) this.refute(c.inc); return; }
    const cur = this.members.get(c.id);
    if (!cur || c.inc < cur.inc || cur.state === MemberState.DEAD) return;
    this.cancelSuspicion(c.id);
    this.setMember({ ...cur, inc: c.inc, state: MemberState.DEAD, since: this.clock.now() });
    this.enqueue(this.memberQ, `m:${c.id}`, { ...c, addr: cur.addr });
  }

  private maybeRefute(yv: YourView): void {
    if (yv.s !== MemberState.ALIVE && yv.inc >= this.inc) this.refute(yv.inc);
  }

  private refute(inc: number): void {
    this.inc = inc + 1;
    this.adjustAwareness(1);
    this.opts.log?.debug({ inc: this.inc }, 'refuting suspicion');
    this.enqueue(this.memberQ, `m:${this.id}`, { id: this.id, addr: this.addr, inc: this.inc, s: MemberState.ALIVE });
  }

  // ---- helpers

  private setMember(m: Member): void {
    const prev = this.members.get(m.id);
    this.members.set(m.id, m);
    if (prev?.state === m.state) return;
    if (m.state === MemberState.DEAD) this.wake('reconnect');
    const e: MemberEvent = { id: m.id, addr: m.addr, state: m.state, prev: prev?.state, inc: m.inc };
    for (const fn of this.listeners) fn(e);
  }

  /** Queue a change for piggy-backing, and make sure gossip rounds run until it has been spread. */
  private enqueue(q: BroadcastQueue, key: string, value: unknown): void {
    q.push(key, value);
    this.wake('gossip');
  }

  private cancelSuspicion(id: string): void {
    this.suspicions.get(id)?.cancel();
    this.suspicions.delete(id);
  }

  private adjustAwareness(d: number): void {
    this.awareness = Math.min(this.cfg.awarenessMax - 1, Math.max(0, this.awareness + d));
  }

  private yourView(m: Member | undefined): YourView | undefined {
    return m && m.state !== MemberState.ALIVE ? { s: m.state, inc: m.inc } : undefined;
  }

  private snapshot(): Change[] {
    const out: Change[] = [{ id: this.id, addr: this.addr, inc: this.inc, s: MemberState.ALIVE }];
    for (const m of this.members.values()) out.push({ id: m.id, addr: m.addr, inc: m.inc, s: m.state });
    return out;
  }

  private piggy(): Piggy {
    const m = this.memberQ.take(this.cfg.maxPiggyItems, this.cfg.maxPiggyBytes / 4) as Change[];
    const u = this.userQ.take(this.cfg.maxPiggyItems, this.cfg.maxPiggyBytes);
    const pb: Piggy = {};
    if (m.length) pb.m = m;
    if (u.length) pb.u = u;
    return pb;
  }

  private send(addr: string, body: DistributiveOmit<GossipMsg, 'from' | 'fa'>): void {
    this.opts.transport.send(addr, { ...body, from: this.id, fa: this.addr } as GossipMsg);
  }
}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;
