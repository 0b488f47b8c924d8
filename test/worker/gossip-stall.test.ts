import t from 'tap';
import { ManualClock, type Clock } from '../../worker/gossip/clock.js';
import { ACK_CH, ASSIGN_CH, Coordinator, NACK_CH, type Assign } from '../../worker/gossip/coordinator.js';
import { Replica } from '../../worker/gossip/replica.js';
import type { Membership, MemberEvent } from '../../worker/gossip/membership.js';

/**
 * The acting coordinator's attempt count, driven by hand: one coordinator `c`, one member `m`, a
 * clock that can jump (a stall: time passes, no timer runs). What a lost lease costs depends on
 * whose fault the loss was; a member's run that failed is judged at once.
 */
function setup(maxAttempts: number) {
  const base = new ManualClock();
  let skew = 0;
  // The coordinator's own process stalls: its clock jumps, and its timers fire late, all at once.
  const clock: Clock & { stall(ms: number): void } = {
    now: () => base.now() + skew,
    setTimeout: (fn, ms) => base.setTimeout(fn, ms),
    clearTimeout: (h) => base.clearTimeout(h),
    stall: (ms) => { skew += ms; },
  };
  let live = ['c', 'm'];
  const change: ((e: MemberEvent) => void)[] = [];
  const app = new Map<string, (from: string, body: unknown) => void>();
  const sent: Assign[] = [];
  const ms = {
    id: 'c',
    live: () => live,
    isLive: (id: string) => live.includes(id),
    onBroadcast: () => {}, broadcast: () => {},
    onApp: (ch: string, fn: (from: string, body: unknown) => void) => { app.set(ch, fn); },
    onChange: (fn: (e: MemberEvent) => void) => { change.push(fn); },
    // m acknowledges every assignment at once (it runs it, and says nothing more unless told to).
    sendApp: (_to: string, ch: string, body: unknown) => {
      if (ch !== ASSIGN_CH) return;
      const a = body as Assign;
      sent.push(a);
      app.get(ACK_CH)!('m', { id: a.id, attempt: a.attempt });
    },
  } as unknown as Membership;
  // c coordinates and runs nothing itself: every lease goes to m.
  const replica = new Replica();
  replica.addTasks([{ id: 'x', prompt: 'x', max_attempts: maxAttempts }]);
  const coord = new Coordinator(ms, replica, { clock, catchUpMs: 0, dispatchIntervalMs: 100, stallGapMs: 2000, random: () => 0, slotsOf: (id) => (id === 'm' ? 1 : 0) });
  coord.activate();
  const member = {
    dies: () => { live = ['c']; for (const fn of change) fn({ id: 'm', addr: '', state: 'dead', inc: 0 } as MemberEvent); },
    back: () => { live = ['c', 'm']; for (const fn of change) fn({ id: 'm', addr: '', state: 'alive', inc: 1 } as MemberEvent); },
    ranAndFailed: (a: Assign) => app.get(NACK_CH)!('m', { id: a.id, attempt: a.attempt, ran: true, error: { code: 'SWARM_ERR_TASK_FAILED', msg: 'boom' } }),
  };
  return { base, clock, coord, replica, member, sent };
}

t.test('a lease lost right after the coordinator\'s own stall uses no attempt; one lost later does', async (t) => {
  const { base, clock, coord, replica, member } = setup(1);
  base.run(300);
  t.equal(replica.get('x')?.lease?.worker, 'm', 'x is leased to m');
  // The coordinator's process is stopped for 10 s; on waking, m looks dead before any of its frames is read.
  clock.stall(10_000);
  member.dies();
  t.equal(replica.get('x')?.lease?.revoked, true, 'the lease is taken back');
  t.equal(replica.get('x')?.lease?.unrun, 1, 'handed back as unrun: the stall used no attempt');
  t.same({ forgiven: coord.stats.forgiven, stalls: coord.stats.stalls }, { forgiven: 1, stalls: 1 }, 'the stall is seen and the lease forgiven');
  member.back();
  base.run(300);
  t.equal(replica.get('x')?.lease?.attempt, 2, 'x is leased again');
  // Past the amnesty a lost lease is the member's: it counts (sched's bound on lost leases applies).
  base.run(31_000);
  member.dies();
  t.equal(replica.get('x')?.lease?.unrun, 1, 'a loss long after the stall counts');
  t.equal(replica.get('x')?.failure, undefined, 'one counted loss does not fail a task of one attempt');
});

t.test('a task whose leases are lost again and again fails after sched\'s bound, not at its first loss', async (t) => {
  const { base, replica, member } = setup(1);
  let losses = 0;
  for (; losses < 10 && !replica.get('x')?.failure; losses++) {
    base.run(300);
    member.dies();
    member.back();
  }
  base.run(300);
  t.equal(replica.get('x')?.failure?.error?.code, 'SWARM_ERR_RETRIES_EXHAUSTED', 'x fails for good');
  t.equal(replica.get('x')?.lease?.attempt, 3, 'after three lost leases (3 x max_attempts 1), as on the hub');
});

t.test('a run that failed on its member is judged at once by sched\'s verdict', async (t) => {
  const { base, replica, member, sent } = setup(2);
  base.run(300);
  member.ranAndFailed(sent.at(-1)!);
  t.equal(replica.get('x')?.failure, undefined, 'first failure of two attempts: retried');
  base.run(1000);
  t.equal(replica.get('x')?.lease?.attempt, 2, 'leased again after its backoff');
  member.ranAndFailed(sent.at(-1)!);
  const f = replica.get('x')?.failure;
  t.equal(f?.error?.code, 'SWARM_ERR_RETRIES_EXHAUSTED', 'second failure: failed for good');
  t.match(f?.error?.msg, /SWARM_ERR_TASK_FAILED: boom/, 'with the member\'s own error as the last one');
});
