import type { Command } from 'commander';
import { fail } from '../exit.js';
import { call, swarmOptions, remoteTarget, type RemoteOptions } from '../http.js';
import { readHubFile, stateDir } from '../state.js';
import { lockHolder } from '../state-lock.js';
import { SwarmError } from '../../protocol/errors.js';
import { formatBytes } from '../../protocol/bytes.js';
import { runningHub } from '../running.js';
import { formatDuration } from '../../hub/retention.js';
import { readFailoverStatusAll, type FailoverStatusFile, type StaleFailoverStatus } from '../../worker/index.js';
import { feedLines, type BehindStatus, type FeedStatus } from './status-feeds.js';

interface Status {
  hub: { pid: number; address?: { host: string; port: number }; uptime_s: number; mode: string; coordinator?: string };
  workers: { id: string; state: string; status: string; role: string; driver: string; inflight: number; done: number; addr?: string; pid?: number; failover_error?: { code: string; msg: string } }[];
  engine?: { mode: string; pid?: number; error?: string; failed_workers?: number; resolved?: string[]; fallbacks?: { note: string; workers: number }[] };
  tasks: { queued: number; leased: number; done: number; failed: number };
  metrics: { dispatch_p50_ms: number; dispatch_p99_ms: number; tokens_out: number };
  failover?: { workers: { id: string; mode: string; coordinator: string }[]; holders?: string[]; keepers?: string[]; feeds?: FeedStatus[] } & BehindStatus;
  journal?: { fsync: string; disk_full: boolean; disk_full_at?: number; damaged_records: number; quarantine?: string; retention?: { retain?: { ageMs: number; count: number; bytes?: number }; hot_finished: number; hot_bytes?: number; evicted: number; refused_behind?: number; behind?: boolean; ceiling_bytes?: number; last_error?: string; archive?: ArchiveView } };
}

/** The archive's part of the status (hub/archive.ts ArchiveStats; the bound's fields absent from a hub before it). */
interface ArchiveView {
  bytes: number; files?: number; disk_full: boolean; torn_tail?: { file: string; offset: number; bytes: number };
  write_errors?: number; last_error?: string; damaged?: { file: string; why: string }[];
  max_bytes?: number; max_age_ms?: number; pruned_files?: number; pruned_bytes?: number; prune_errors?: number; last_prune_error?: string;
}

/**
 * Without a hub (killed, in gossip mode) the workers' failover status files tell the mode and who
 * coordinates: the coordinator most agents name, and the replica of the agent that coordinates.
 */
export function gossipStatus(files: FailoverStatusFile[]): Record<string, unknown> {
  const agents = files.flatMap((f) => f.agents.map((a) => ({ ...a, pid: f.pid })));
  const votes = new Map<string, number>();
  for (const a of agents) if (a.mode === 'gossip') votes.set(a.coordinator, (votes.get(a.coordinator) ?? 0) + 1);
  const coordinator = [...votes].sort((a, b) => b[1] - a[1])[0]?.[0];
  const lead = agents.find((a) => a.id === coordinator) ?? agents[0];
  const modes = new Set(agents.map((a) => a.mode));
  const mode = modes.has('gossip') ? 'gossip' : modes.has('reconciling') ? 'reconciling' : 'star';
  return {
    hub: { mode, coordinator: mode === 'gossip' ? coordinator : 'hub', reachable: false },
    workers: agents.map((a) => ({ id: a.id, mode: a.mode, coordinator: a.coordinator, epoch: a.epoch, live: a.live, pid: a.pid })),
    tasks: lead ? { queued: lead.replica.queued, leased: lead.replica.leased, done: lead.replica.done, failed: lead.replica.failed } : undefined,
    // Topology runs as the coordinator sees them: driven on in gossip mode, or finished without a hub.
    runs: lead?.runs ? [
      ...lead.runs.known.map((run) => ({ run, state: lead.runs!.driving ? 'running' : 'waiting', driver: lead.id })),
      ...lead.runs.finished.map((f) => ({ run: f.run, state: 'done', verdict: f.verdict, driver: lead.id })),
    ] : [],
  };
}

/** The results archive in one line: what is hot and archived, and what went wrong with its file. */
function archiveLine(r: NonNullable<NonNullable<Status['journal']>['retention']>): string {
  const full = r.archive?.disk_full ? '; DISK FULL: finished tasks stay hot until space frees (nothing is lost)' : '';
  const t = r.archive?.torn_tail;
  const torn = t ? `; a torn last line was cut at start (${t.file} offset ${t.offset}, ${t.bytes} bytes; its tasks stayed hot)` : '';
  const n = r.archive?.write_errors ?? 0;
  const failed = n ? `; ${n} archive write${n > 1 ? 's' : ''} failed since start (last: ${r.archive?.last_error ?? '?'})` : '';
  const damaged = (r.archive?.damaged ?? []).map((d) => `\n         DAMAGED ${d.file}: ${d.why}`).join('');
  return `archive  ${r.evicted} finished tasks archived since start${full}${failed}${torn} (swarm results)${r.archive ? `\n         ${archiveDisk(r.archive)}` : ''}${damaged}`;
}

/** The archive on disk against its bound: `3 files, 1.9 GiB of 2 GiB (--archive-max); 12 files (760 MiB) pruned since start`. */
function archiveDisk(a: ArchiveView): string {
  const bound = a.max_bytes || a.max_age_ms ? ` of ${[a.max_bytes ? formatBytes(a.max_bytes) : '', a.max_age_ms ? `at most ${formatDuration(a.max_age_ms)} old` : ''].filter(Boolean).join(', ')}` : ', no bound';
  const pruned = a.pruned_files ? `; ${a.pruned_files} files (${formatBytes(a.pruned_bytes ?? 0)}) pruned since start` : '';
  const err = a.prune_errors ? `; ${a.prune_errors} files could not be removed or begun (${a.last_prune_error ?? 'retried'})` : '';
  return `${a.files ?? '?'} files, ${formatBytes(a.bytes)}${bound} (--archive-max)${pruned}${err}`;
}

/**
 * The hot state against the horizon in one line: finished tasks and their bytes, each with its bound;
 * and new work refused while the archive fell behind (past the bytes bound's ceiling), now or since start.
 */
export function retainLine(r: NonNullable<NonNullable<Status['journal']>['retention']>): string {
  const h = r.retain;
  const age = h ? formatDuration(h.ageMs) : '?';
  const bytes = r.hot_bytes !== undefined ? `, ${formatBytes(r.hot_bytes)}${h?.bytes ? ` of ${formatBytes(h.bytes)}` : ''}` : '';
  // As the hub says it (a hub before these fields says nothing of it).
  const ceiling = r.ceiling_bytes !== undefined ? formatBytes(r.ceiling_bytes) : 'the ceiling';
  const n = r.refused_behind ?? 0;
  const cause = r.last_error ? `while archive writes fail (${r.last_error.slice(0, 200)})` : 'while the archive catches up';
  const refused = r.behind
    ? `; NEW TASKS REFUSED NOW (SWARM_ERR_QUEUE_FULL): past ${ceiling} hot ${cause}${n ? `, ${n} submission(s) refused since start` : ''}`
    : n ? `; ${n} submission(s) refused since start while the archive was behind (past ${ceiling} hot)` : '';
  return `retain   ${r.hot_finished}${h ? ` of ${h.count}` : ''} finished tasks hot${bytes}, each for at most ${age} (--retain)${refused}`;
}

/** The left-over status files, said in one line: how many, and why each is not a live worker's. */
function staleNote(stale: StaleFailoverStatus[]): string {
  const shown = stale.slice(0, 3).map((f) => `pid ${f.pid}: ${f.why}, written ${f.age_s} s ago`).join('; ');
  return `ignored ${stale.length} failover status file(s) left by worker processes that are gone (${shown}${stale.length > 3 ? '; …' : ''})`;
}

export function registerStatus(program: Command): void {
  swarmOptions(program.command('status')
    .description('show the running swarm: hub, workers, tasks (and, if the hub is down, the failover mode)')
    .option('--json', 'print one JSON object', false))
    .action(async (o: RemoteOptions & { stateDir?: string; json: boolean }) => {
      try {
        const remote = remoteTarget(o);
        // A hub named by --hub-url needs no state directory (one that is a file here is not an error).
        const dir = remote ? undefined : stateDir(o.stateDir);
        let s: Status;
        try {
          s = await call<Status>(remote ?? runningHub(dir!), 'GET', '/status');
        } catch (err) {
          // A hub that holds the directory's lock but has no readable hub.json (removed or damaged while
          // it ran) is running: "unreachable" or "no running swarm" would be wrong.
          const lost = dir === undefined || readHubFile(dir) ? undefined : lockHolder(dir);
          if (lost !== undefined) throw new SwarmError('SWARM_ERR_STATE_ACCESS', `a hub runs in ${dir} (pid ${lost}, holding its lock) but its hub.json is missing or damaged, so it cannot be reached; \`swarm down\` stops it`);
          const { live: files, stale } = dir === undefined ? { live: [], stale: [] } : readFailoverStatusAll(dir);
          // Files the workers left when they died say nothing of a swarm: named as left over, never shown as one.
          if (!files.length) throw stale.length && err instanceof SwarmError ? new SwarmError(err.code, `${err.message}; ${staleNote(stale)}`) : err;
          const g = { ...gossipStatus(files), ...(stale.length ? { stale_status_files: stale } : {}) } as { hub: { mode: string; coordinator?: string }; workers: unknown[]; tasks?: Status['tasks']; runs: { run: string; state: string; verdict?: string }[] };
          if (o.json) { process.stdout.write(JSON.stringify(g) + '\n'); return; }
          const t = g.tasks;
          process.stdout.write([
            `hub      unreachable; mode ${g.hub.mode}, coordinator ${g.hub.coordinator ?? '?'}`,
            `workers  ${g.workers.length} (from failover status files)${stale.length ? `; ${staleNote(stale)}` : ''}`,
            t ? `tasks    ${t.queued} queued, ${t.leased} running, ${t.done} done, ${t.failed} failed (coordinator's replica)` : '',
            ...g.runs.map((r) => `run      ${r.run} ${r.state}${r.verdict ? ` (${r.verdict})` : ''}, driven by the coordinator`),
          ].filter(Boolean).join('\n') + '\n');
          return;
        }
        if (o.json) { process.stdout.write(JSON.stringify(s) + '\n'); return; }
        const byState = new Map<string, number>();
        for (const w of s.workers) byState.set(w.state, (byState.get(w.state) ?? 0) + 1);
        const fo = s.failover?.workers ?? [];
        // Agents that share a process go down and come back together (`swarm up --procs`).
        const noFailover = s.workers.filter((w) => w.failover_error);
        const procs = new Set(s.workers.flatMap((w) => (w.pid ? [`${w.addr ?? ''}/${w.pid}`] : []))).size;
        const lines = [
          `hub      ${s.hub.address?.host}:${s.hub.address?.port} pid ${s.hub.pid} up ${s.hub.uptime_s}s mode ${s.hub.mode}${fo.length ? ` (${fo.length} failover workers)` : ''}`,
          `workers  ${s.workers.length} (${[...byState].map(([k, v]) => `${v} ${k}`).join(', ') || 'none'})${procs ? ` in ${procs} process${procs === 1 ? '' : 'es'}` : ''}`,
          ...(s.engine ? [`engine   ${s.engine.mode}${s.engine.error ? `; FAILED to start on ${s.engine.failed_workers ?? 1} worker(s): ${s.engine.error}` : ''}${s.engine.resolved?.length === 1 ? `; ${s.engine.resolved[0]}` : ''}`] : []),
          ...(s.engine?.resolved && s.engine.resolved.length > 1 ? s.engine.resolved.map((r) => `         ${r}`) : []),
          // An engine that runs a lesser CPU variant (or addon) than its first choice after a SIGILL here.
          ...(s.engine?.fallbacks ?? []).map((f) => `         fallback on ${f.workers} worker(s): ${f.note}`),
          // Who a failover would leave the state with: the replica holders, and the keepers of the open tasks.
          ...(s.failover?.holders?.length ? [`replicas held by ${s.failover.holders.join(', ')}${s.failover.keepers?.length ? `; open tasks also kept by ${s.failover.keepers.join(', ')}` : ''}`] : []),
          // Each holder's feed: a holder falling behind, and why (the link, the hub's loop, the bound).
          ...feedLines(s.failover?.feeds ?? [], s.failover),
          // Shown whatever the number of workers: such an agent runs star-only, and only its log said so.
          ...(noFailover.length ? [`failover OFF for ${noFailover.length} worker(s) (star only): ${noFailover.slice(0, 5).map((w) => `${w.id}: ${w.failover_error!.code}: ${w.failover_error!.msg}`).join('; ')}${noFailover.length > 5 ? '; …' : ''}`] : []),
          `tasks    ${s.tasks.queued} queued, ${s.tasks.leased} running, ${s.tasks.done} done, ${s.tasks.failed} failed`,
          `dispatch p50 ${s.metrics.dispatch_p50_ms.toFixed(3)} ms, p99 ${s.metrics.dispatch_p99_ms.toFixed(3)} ms; tokens out ${s.metrics.tokens_out}`,
          ...(s.journal ? [`journal  fsync ${s.journal.fsync}${journalFull(s.journal)}${s.journal.damaged_records ? `; ${s.journal.damaged_records} damaged records set aside in ${s.journal.quarantine}` : ''}`] : []),
          ...(s.journal?.retention ? [retainLine(s.journal.retention), archiveLine(s.journal.retention)] : []),
        ];
        if (s.workers.length <= 40) {
          lines.push('', 'ID'.padEnd(24) + 'STATE'.padEnd(10) + 'ROLE'.padEnd(12) + 'DRIVER'.padEnd(12) + 'INFLIGHT  DONE  PID       ADDRESS');
          for (const w of s.workers) lines.push(w.id.padEnd(24) + w.state.padEnd(10) + (w.role || '-').padEnd(12) + w.driver.padEnd(12) + String(w.inflight).padEnd(10) + String(w.done).padEnd(6) + String(w.pid ?? '-').padEnd(10) + (w.addr ?? '-'));
        }
        process.stdout.write(lines.join('\n') + '\n');
      } catch (err) { fail(err, o.json); }
    });
}

/** The journal's disk: full now, or full within the last 10 minutes (new work was refused then). */
function journalFull(j: { disk_full: boolean; disk_full_at?: number }, now = Date.now()): string {
  if (j.disk_full) return '; DISK FULL: new work is refused until space frees';
  const ago = j.disk_full_at !== undefined ? now - j.disk_full_at : Infinity;
  return ago < 600_000 ? `; the DISK WAS FULL ${Math.max(1, Math.round(ago / 1000))} s ago (new work was refused then; accepted again now)` : '';
}
