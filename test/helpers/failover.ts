import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { Test } from 'tap';
import { alive, api, hubFile, journal, swarmBg, until } from './cli.js';

/** Chaos-test scaffolding for failover: a hub and a worker process on a state dir. */

export interface Proc { child: ChildProcess; output: () => string }

/** What `swarm status --json` / the failover status files say about one agent. */
export interface AgentView { id: string; mode: string; coordinator: string; coordinating: boolean; holds_state?: boolean; epoch: number; live: number; peer_addr: string; replica: { queued: number; leased: number; done: number; failed: number; size: number }; gossip_since?: number; left?: unknown[]; leases?: { revoked: number; forgiven: number; stalls: number; failed: number } }

/** Kill a background process group (started detached) with a signal; ignores gone ones. */
export function killGroup(p: Proc | undefined, sig: NodeJS.Signals = 'SIGKILL'): void {
  const pid = p?.child.pid;
  if (!pid) return;
  try { process.kill(-pid, sig); } catch { /* gone */ }
}

/** Start `swarm hub` on `dir`; resolves once its hub.json names this process. */
export async function startHub(dir: string, extra: string[] = []): Promise<Proc> {
  const before = hubFile(dir)?.pid;
  const p = swarmBg(['hub', '--state-dir', dir, '--log-file', path.join(dir, `hub-${Date.now()}.log`), ...extra]);
  const ok = await until(() => { const h = hubFile(dir); return !!h && h.pid !== before && h.pid === p.child.pid; }, 20_000, 50);
  if (!ok) { killGroup(p); throw new Error(`hub did not start: ${p.output().slice(-2000)}`); }
  return p;
}

/** Start `swarm worker --failover --count n` (echo driver) on `dir`. */
export function startWorkers(dir: string, n: number, prefix = 'w', extra: string[] = []): Proc {
  return swarmBg(['worker', '--state-dir', dir, '--count', String(n), '--id', prefix, '--failover', '--driver', 'echo',
    '--driver-opt', 'latency_ms=50', '--log-file', path.join(dir, `${prefix}-${Date.now()}.log`), ...extra]);
}

const ownPidns = (() => { try { return fs.readlinkSync('/proc/self/ns/pid'); } catch { return undefined; } })();

/** The failover status of every agent of every worker process (status files). */
export function agents(dir: string): AgentView[] {
  const d = path.join(dir, 'failover');
  let names: string[] = [];
  try { names = fs.readdirSync(d); } catch { return []; }
  return names.filter((n) => n.endsWith('.json')).flatMap((n) => {
    try {
      const f = JSON.parse(fs.readFileSync(path.join(d, n), 'utf8')) as { pid: number; pidns?: string; at: number; agents: AgentView[] };
      // A writer in another pid namespace (a container) has a pid that means nothing here: its file's
      // age says whether it lives (rewritten at least every 3 s; the containers' healthcheck allows 15).
      const here = f.pidns === undefined || f.pidns === ownPidns;
      return (here ? alive(f.pid) : Date.now() - f.at < 15_000) ? f.agents : [];
    } catch { return []; }
  });
}

export interface HubStatus { hub: { mode: string; pid: number }; workers: { id: string }[]; tasks: { queued: number; leased: number; done: number; failed: number }; failover?: { workers: { id: string; mode: string }[]; recorded: number; duplicate: number } }

export async function hubStatus(dir: string): Promise<HubStatus | undefined> {
  try { return await api<HubStatus>(dir, 'GET', '/status'); } catch { return undefined; }
}

/** Submit `n` echo tasks with ids `<prefix>-000…`; returns the ids. */
export async function submit(dir: string, n: number, prefix = 't'): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(3, '0')}`);
  const r = await api<{ accepted?: unknown[] }>(dir, 'POST', '/tasks', { tasks: ids.map((id) => ({ id, prompt: `task ${id}` })) });
  if (!Array.isArray(r.accepted) || r.accepted.length !== n) throw new Error(`submit failed: ${JSON.stringify(r).slice(0, 300)}`);
  return ids;
}

/** Results per task id in the hub's journal: lost = ids with none, duplicated = ids with more than one. */
export function tally(dir: string, ids: string[]): { lost: number; duplicated: number; results: number; wrong: number } {
  const recs = journal(dir) as { t: string; id?: string; text?: string }[];
  const count = new Map<string, number>();
  let wrong = 0;
  for (const r of recs) {
    if (r.t !== 'result' || !r.id) continue;
    count.set(r.id, (count.get(r.id) ?? 0) + 1);
    if (r.text !== `echo: task ${r.id}`) wrong++;
  }
  let lost = 0, duplicated = 0, results = 0;
  for (const id of ids) { const c = count.get(id) ?? 0; results += c; if (c === 0) lost++; if (c > 1) duplicated++; }
  return { lost, duplicated, results, wrong };
}

/**
 * The stall tests' verdict on a run's journal: no task failed (none ended RETRIES_EXHAUSTED), and
 * every id has exactly one result with the echo's text.
 */
export function assertOncePerTask(t: Test, dir: string, ids: string[]): void {
  const fails = (journal(dir) as { t: string; id?: string; error?: { code: string } }[]).filter((r) => r.t === 'fail');
  t.same(fails.map((r) => `${r.id}: ${r.error?.code}`), [], 'no task ended SWARM_ERR_RETRIES_EXHAUSTED (or failed at all)');
  const r = tally(dir, ids);
  t.comment(`lost=${r.lost} duplicated=${r.duplicated} wrong=${r.wrong}`);
  t.equal(r.lost, 0, 'no result lost');
  t.equal(r.duplicated, 0, 'no result recorded twice');
  t.equal(r.wrong, 0, 'no answer changed');
}

/** Wait until the hub has recorded all `n` tasks as final. */
export async function hubDone(dir: string, n: number, ms: number): Promise<boolean> {
  return until(async () => { const s = await hubStatus(dir); return !!s && s.tasks.done + s.tasks.failed >= n; }, ms, 100);
}

/** Wait until every agent in the status files is in `mode` (and there are `count` of them). */
export function allInMode(dir: string, mode: string, count: number, ms: number): Promise<boolean> {
  return until(() => { const a = agents(dir); return a.length === count && a.every((x) => x.mode === mode); }, ms, 50);
}

/** `n` distinct free loopback ports (bound, then released). */
export async function freePorts(n: number): Promise<number[]> {
  // Below the kernel's ephemeral range (32768+): ports found free there are not taken meanwhile by
  // the outgoing connections of tests running in parallel, as port-0 ports can be.
  const net = await import('node:net');
  const free = (port: number) => new Promise<boolean>((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
  const out: number[] = [];
  for (let tries = 0; out.length < n && tries < 20 * n; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (!out.includes(port) && (await free(port))) out.push(port);
  }
  if (out.length < n) throw new Error(`found only ${out.length} of ${n} free ports`);
  return out;
}

/** Processes of one test, killed on its teardown. */
export function procs(t: { teardown(fn: () => void): void }): { add(p: Proc): Proc } {
  const list: Proc[] = [];
  t.teardown(() => { for (const p of list) killGroup(p); });
  return { add: (p) => { list.push(p); return p; } };
}

type Asserts = Pick<Test, 'ok' | 'equal' | 'comment'>;

/** Count results per task id in the journal and assert each was recorded once, with the fault-free answer. */
export function expectExactlyOnce(t: Asserts, dir: string, ids: string[]): void {
  const r = tally(dir, ids);
  t.comment(`lost=${r.lost} duplicated=${r.duplicated} wrong=${r.wrong}`);
  t.equal(r.lost, 0, 'no result lost');
  t.equal(r.duplicated, 0, 'no result recorded twice');
  t.equal(r.wrong, 0, 'every answer is the fault-free one');
}

/**
 * Wait (a bound, not a timing claim) until every worker's replica has all `n` tasks done; on failure show
 * each replica and, from the coordinator's, the tasks left with their leases.
 */
/** A member that takes in the whole state in gossip mode (a status without the field predates the rule: every member did). */
export const holdsState = (a: AgentView): boolean => a.holds_state ?? true;

export async function expectReplicasDone(t: Asserts, dir: string, n: number, ms: number, msg: string): Promise<void> {
  // The members that hold the state (the holders, the acting coordinator): the others keep only their own tasks.
  const done = await until(() => { const hs = agents(dir).filter(holdsState); return hs.length > 0 && hs.every((a) => a.replica.done === n); }, ms, 100);
  if (!done) {
    const as = agents(dir);
    t.comment('replicas done: ' + as.map((a) => `${a.id}=${a.replica.done}d/${a.replica.failed}f/${a.replica.leased}l/${a.replica.queued}q/${a.mode}/${a.live}${holdsState(a) ? '/holds' : ''}`).join(' '));
    const c = as.find((a) => a.coordinating) ?? as[0];
    if (c?.left) t.comment(`left in ${c.id}'s replica (epoch ${c.epoch}, now ${Date.now()}): ${JSON.stringify(c.left)}`);
  }
  t.ok(done, msg);
}

/**
 * A hub and `n` failover workers (`swarm worker --count n`, echo driver) on `dir`, killed on the
 * test's teardown; `tasks` submitted and the run under way (`underWay` done). The hub's process is returned
 * to be killed, stopped or replaced.
 */
export async function runUnderWay(t: Asserts & { teardown(fn: () => void): void }, dir: string, o: { n: number; tasks: number; underWay: number; workerArgs?: string[] }) {
  const ps = procs(t);
  const hub = ps.add(await startHub(dir));
  ps.add(startWorkers(dir, o.n, 'w', o.workerArgs ?? []));
  t.ok(await until(async () => (await hubStatus(dir))?.failover?.workers.length === o.n, 20_000, 100), 'all workers joined with a peer port');
  const ids = await submit(dir, o.tasks);
  t.ok(await until(async () => ((await hubStatus(dir))?.tasks.done ?? 0) >= o.underWay, 20_000, 10), 'the run is under way');
  return { ps, hub, ids };
}

/** A topology run as the control API shows it. */
export interface RunView { run: string; state: string; outcome?: { output: string; verdict?: string }; progress?: { done: number } }

/** Wait (bounded) until the hub of `dir` reports the run done; undefined if no hub answered. */
export async function waitRun(dir: string, run: string, ms: number): Promise<RunView | undefined> {
  let v: RunView | undefined;
  await until(async () => {
    try { v = await api<RunView>(dir, 'POST', `/runs/${run}/wait`, { timeout_ms: 1000 }); } catch { v = undefined; }
    return v?.state === 'done';
  }, ms, 50);
  return v;
}

/** One run's tasks in a hub's journal: each node's first result text, and lost / duplicated results per task id. */
export function tallyRun(dir: string, run: string): { tasks: number; lost: number; duplicated: number; texts: Map<string, string> } {
  const recs = journal(dir) as { t: string; id?: string; text?: string; spec?: { id: string } }[];
  const ids = new Set(recs.filter((r) => r.t === 'task' && r.spec?.id.startsWith(`${run}:`)).map((r) => r.spec!.id));
  const count = new Map<string, number>();
  const texts = new Map<string, string>();
  for (const r of recs) {
    if (r.t !== 'result' || !r.id || !ids.has(r.id)) continue;
    count.set(r.id, (count.get(r.id) ?? 0) + 1);
    const node = r.id.slice(run.length + 1);
    if (!texts.has(node)) texts.set(node, r.text ?? '');
  }
  let lost = 0, duplicated = 0;
  for (const id of ids) { const c = count.get(id) ?? 0; if (c === 0) lost++; if (c > 1) duplicated++; }
  return { tasks: ids.size, lost, duplicated, texts };
}

type RunsView = { runs?: { finished: { run: string }[]; ended_on_hub?: string[] } };

/** True once some worker's status file says it drove `run` to its end in gossip mode. */
export function finishedInGossip(dir: string, run: string): boolean {
  return agents(dir).some((a) => (a as RunsView).runs?.finished.some((f) => f.run === run));
}

/** True if the holders heard from the hub that `run` ended (before it died). */
export function endedOnHub(dir: string, run: string): boolean {
  return agents(dir).some((a) => (a as RunsView).runs?.ended_on_hub?.includes(run));
}
