import type { Logger } from 'pino';
// The files, not protocol/index.js: `swarm up` reads its options from here, and the index loads the codecs and the connection.
import { SwarmError } from '../protocol/errors.js';
import { Type } from '../protocol/types.js';
import type { Message } from '../protocol/schemas.js';
import type { Registry, WorkerEntry } from './registry.js';

/** How many workers should hold each role, e.g. `{ thinker: 2, worker: 3 }`. */
export type RolePlan = Record<string, number>;

const ROLE_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Parse `thinker=2,worker=3` (the `--roles` option). Throws SWARM_ERR_CONFIG. */
export function parseRolePlan(text: string): RolePlan {
  const entries: [string, number][] = [];
  for (const part of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const m = /^([^=]+)=(\d+)$/.exec(part);
    if (!m) throw new SwarmError('SWARM_ERR_CONFIG', `roles: expected ROLE=COUNT, got "${part}"`);
    entries.push([m[1]!.trim(), Number(m[2])]);
  }
  // fromEntries: a role named __proto__ becomes an own key (and is refused), not a prototype.
  return checkRolePlan(Object.fromEntries(entries));
}

/** Validate a plan from the CLI or the control API. */
export function checkRolePlan(v: unknown): RolePlan {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new SwarmError('SWARM_ERR_CONFIG', 'roles: expected an object of role -> count');
  const plan: RolePlan = Object.create(null) as RolePlan;
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > 256) throw new SwarmError('SWARM_ERR_CONFIG', 'roles: at most 256 roles');
  for (const [role, n] of entries) {
    if (!ROLE_RE.test(role)) throw new SwarmError('SWARM_ERR_CONFIG', `roles: bad role name "${role.slice(0, 64)}" (letters, digits, _ . -; at most 64)`);
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 100_000) throw new SwarmError('SWARM_ERR_CONFIG', `roles: count of ${role} must be an integer 0-100000`);
    plan[role] = n;
  }
  return { ...plan };
}

/** A role sent in ASSIGN_ROLE and not yet acknowledged. */
export interface PendingRole { role: string; msgId: string; fromPlan: boolean }

/**
 * Hands out roles with ASSIGN_ROLE (spec section 4): from a plan (`--roles thinker=2,worker=3`,
 * or POST /roles) as workers join and leave, or one worker at a time (POST /workers/<id>/role).
 * A role counts for dispatch only once the worker has answered ACK; until then it is pending.
 * The plan moves only workers that have no role or that it gave a role itself: a worker that
 * joined with its own `role` keeps it (and counts towards that role's number).
 */
export class RoleAssigner {
  private plan: RolePlan = {};
  /** Roles this hub gave by plan, by worker id: a reconnect that comes back with one is still the plan's. */
  private readonly planned = new Map<string, string>();

  constructor(private readonly registry: Registry, private readonly onChanged: () => void, private readonly log: Logger) {}

  get current(): RolePlan { return { ...this.plan }; }

  /** Replace the plan and hand out roles to match it as far as the connected workers allow. */
  setPlan(plan: RolePlan): void {
    this.plan = checkRolePlan(plan);
    this.rebalance();
  }

  /** A worker joined: was its role one the plan gave it? Then hand out roles. */
  joined(w: WorkerEntry): void {
    w.roleFromPlan = w.role !== '' && this.planned.get(w.id) === w.role;
    this.rebalance();
  }

  left(): void { this.rebalance(); }

  /** Give one worker a role now (operator's choice: the plan will not move it). */
  assign(w: WorkerEntry, role: string, specRef?: string): string {
    return this.send(w, role, false, specRef);
  }

  /** The worker's answer to ASSIGN_ROLE. */
  onAck(w: WorkerEntry, msg: Message<'ACK'>): void {
    const p = w.pendingRole;
    if (!p || msg.re !== p.msgId) return;
    w.pendingRole = undefined;
    if (msg.payload.ok) {
      w.role = p.role;
      w.roleFromPlan = p.fromPlan;
      if (p.fromPlan) this.planned.set(w.id, p.role); else this.planned.delete(w.id);
      this.log.info({ worker: w.id, role: p.role }, 'role taken');
    } else {
      w.roleRefused = true;
      this.log.warn({ worker: w.id, role: p.role }, 'worker refused the role');
    }
    this.onChanged();
    this.rebalance();
  }

  /** The worker changed its own role (ASSIGN_ROLE from the worker): it is its own choice now. */
  selfAssigned(w: WorkerEntry, role: string): void {
    w.role = role;
    w.roleFromPlan = false;
    w.pendingRole = undefined;
    this.planned.delete(w.id);
    this.onChanged();
    this.rebalance();
  }

  /** Hand out roles where the plan has more places than workers holding (or promised) them. */
  private rebalance(): void {
    const roles = Object.keys(this.plan);
    if (roles.length === 0) return;
    const workers = [...this.registry.all()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const roleOf = (w: WorkerEntry) => w.pendingRole?.role ?? w.role;
    const want = (r: string) => (Object.hasOwn(this.plan, r) ? this.plan[r]! : 0);
    const count = new Map<string, number>();
    for (const w of workers) count.set(roleOf(w), (count.get(roleOf(w)) ?? 0) + 1);
    // Workers the plan may move: no role at all, or a plan role that is over its number (or dropped).
    const movable: WorkerEntry[] = [];
    for (const w of workers) {
      if (w.roleRefused || (w.pendingRole && !w.pendingRole.fromPlan)) continue;
      const r = roleOf(w);
      const planned = w.pendingRole ? w.pendingRole.fromPlan : w.roleFromPlan;
      if (r === '') { movable.push(w); continue; }
      if (!planned) continue;
      if ((count.get(r) ?? 0) > want(r)) { movable.push(w); count.set(r, count.get(r)! - 1); }
    }
    const surplus = new Set(movable.filter((w) => roleOf(w) !== ''));
    for (const role of roles) {
      let missing = want(role) - (count.get(role) ?? 0);
      while (missing > 0 && movable.length > 0) {
        // Role-less workers first; then ones the plan takes from a role it shrank.
        const i = movable.findIndex((w) => !surplus.has(w));
        const w = movable.splice(i >= 0 ? i : 0, 1)[0]!;
        surplus.delete(w);
        this.send(w, role, true);
        missing--;
      }
    }
    // Left over from a shrunk role and needed nowhere: back to taking role-less tasks.
    for (const w of surplus) this.send(w, '', true);
  }

  private send(w: WorkerEntry, role: string, fromPlan: boolean, specRef?: string): string {
    const payload: { role: string; spec_ref?: string } = { role };
    if (specRef !== undefined) payload.spec_ref = specRef;
    const msgId = w.conn.send(Type.ASSIGN_ROLE, payload);
    w.pendingRole = { role, msgId, fromPlan };
    this.log.info({ worker: w.id, role, fromPlan }, 'role assigned');
    this.onChanged();
    return msgId;
  }
}
