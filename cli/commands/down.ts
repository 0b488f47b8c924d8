import fs from 'node:fs';
import type { Command } from 'commander';
import { alive } from '../../hub/supervisor.js';
import { inThisNamespace, isOldFormat, isSameProcess, localProcess, pidNamespace, readPidFile, type ProcId } from '../../hub/proc-id.js';
import { killGroup } from '../../drivers/lifecycle.js';
import { stopEngines } from '../../drivers/batched/engine-stop.js';
import { fail } from '../exit.js';
import { call, swarmOptions, remoteTarget, type RemoteOptions } from '../http.js';
import { int } from '../options.js';
import { hubAnswers, hubIsOurs, hubPid, hubUnseen } from '../running.js';
import { pidFiles, readHubFile, stateDir, type HubFile } from '../state.js';
import { startingProcs } from '../starting.js';
import { lockHeld, lockHolder } from '../state-lock.js';
import { takeStopTurn } from '../stopping.js';
import { SwarmError } from '../../protocol/errors.js';

/** How much longer than its own --timeout a `down` waits for another `down` (which kills leftovers and engines after its timeout). */
const OTHER_DOWN_MARGIN_MS = 20_000;

export function registerDown(program: Command): void {
  swarmOptions(program.command('down')
    .description('stop the swarm of this state directory; no process of it is left behind')
    .option('--timeout <ms>', 'wait this long for a clean stop before killing', int('--timeout', 1), 10_000)
    .option('--json', 'print JSON', false))
    .action(async (o: RemoteOptions & { stateDir?: string; timeout: number; json: boolean }) => {
      try {
        const remote = remoteTarget(o);
        if (remote) {
          // `swarm down` stops the swarm: the hub KILLs every worker, its own and those started apart.
          await call(remote, 'POST', '/shutdown', { workers: 'all' }, 5000);
          if (o.json) process.stdout.write(JSON.stringify({ stopped: true, remote: `${remote.control.host}:${remote.control.port}` }) + '\n');
          else process.stdout.write(`swarm down: the hub at ${remote.control.host}:${remote.control.port} is shutting down\n`);
          return;
        }
        const dir = stateDir(o.stateDir);
        // One stop at a time: a second `down` waits for the first's, then looks for what is left.
        const turn = await takeStopTurn(dir, o.timeout + OTHER_DOWN_MARGIN_MS, (pid) => {
          process.stderr.write(`swarm down: another \`swarm down\`${pid ? ` (pid ${pid})` : ''} is stopping the swarm in ${dir}: waiting for it\n`);
        });
        if ('busy' in turn) throw new SwarmError('SWARM_ERR_TIMEOUT', `another \`swarm down\`${turn.busy ? ` (pid ${turn.busy})` : ''} is still stopping the swarm in ${dir} after ${o.timeout + OTHER_DOWN_MARGIN_MS} ms`);
        process.once('exit', () => turn.release());
        const file = readHubFile(dir);
        // Only a record with a start time names a process: without one (an older format) its pid may
        // be anyone's by now, a `tail -f` of our log or another swarm's hub. Those are left alone, said.
        const warnings: string[] = [];
        if (file && file.proc_start === undefined && alive(file.pid)) warnings.push(`hub.json names pid ${file.pid} without a start time (an older format): left alone; if it is this swarm's hub, stop it yourself`);
        // A hub.json whose pid now belongs to another process is stale: nothing of it is signalled.
        // One written in a pid namespace this one cannot see (the host's, read in a container) is judged
        // by its answer: its pid is no process of this namespace, and none is signalled by it.
        let hub = ourHub(file) ?? (file && hubUnseen(file) && await hubAnswers(file) ? file : undefined);
        // A swarm that is starting (`swarm up` before its hub wrote hub.json) is waited for and stopped,
        // never reported as "not running" to come up behind this.
        const starting = hub ? { left: [] } : await awaitStarting(dir, o.timeout);
        hub ??= starting.hub;
        let clean = false;
        if (hub) {
          // Its pid as this namespace numbers it (a hub in a container: not the pid its hub.json says).
          const pid = hubPid(hub);
          await call(hub, 'POST', '/shutdown', { workers: 'all' }, 5000).catch(() => undefined);
          clean = await until(async () => !await hubRuns(hub, pid), o.timeout);
          if (!clean && pid !== undefined && isSameProcess({ pid, start: hub.proc_start })) killGroup(pid, 'SIGKILL');
          else if (!clean) warnings.push(`the hub (pid ${hub.pid} in a pid namespace not visible from here) did not stop within ${o.timeout} ms; it is not signalled from here: stop it where it runs`);
        }
        // A hub that holds the directory's lock with no hub.json to name it (removed or damaged while it
        // ran) and no `swarm up` starting it: down said "still starting, run again" for ever. Its lock
        // proves it is this directory's hub: it is stopped as one that does not answer.
        const byLock = !hub && !starting.left.length && await lockHeld(dir) ? lockHolder(dir) : undefined;
        if (byLock !== undefined) {
          killGroup(byLock, 'SIGTERM');
          clean = await until(() => !alive(byLock), o.timeout);
          if (!clean) { killGroup(byLock, 'SIGKILL'); await until(() => !alive(byLock), 3000); }
        }
        const { left, foreign, old } = await stopLeftovers(dir);
        if (old.length) warnings.push(`pid file(s) without a start time (an older format) name pid(s) ${old.join(', ')}: left alone`);
        // The batched engine would idle out a moment after its workers: down returns once it has exited.
        await stopEngines(dir);
        // Still starting past --timeout with no hub to ask: its `swarm up` is stopped (before it spawned a
        // hub, nothing else is left); a hub that holds the lock without hub.json is counted as remaining.
        for (const p of starting.left) try { process.kill(p.pid, 'SIGTERM'); } catch { /* gone */ }
        if (starting.left.length) await until(() => starting.left.every((p) => !isSameProcess(p)), 3000);
        // A start this namespace cannot see, still marked and with no hub to ask, is not signalled from here.
        const unseen = (starting.unseen ?? []).filter((u) => fs.existsSync(u.file));
        for (const u of unseen) warnings.push(`a \`swarm up\` of a pid namespace not visible from here (pid ${u.rec.pid} there) marked a start in ${dir} and had no hub answering after ${o.timeout} ms; it is not signalled from here: stop it where it runs (if nothing starts there any more, remove ${u.file})`);
        const lockLeft = !hub && await lockHeld(dir);
        const startingLeft = starting.left.filter((p) => isSameProcess(p)).length + unseen.length + (lockLeft ? 1 : 0);
        const remaining = ourPids(dir).length + (hub && await hubRuns(hub) ? 1 : 0) + startingLeft;
        const stopped = Boolean(hub) || byLock !== undefined || starting.left.length > 0;
        // `other_down`: the `swarm down` this one waited for (its pid, null if unknown), which did the
        // stopping; `other_down_finished`: false if it ended (was killed) before it finished.
        const result = { stopped, clean, killed_leftovers: left.length, remaining, not_ours: foreign, warnings, ...(turn.waited ? { other_down: turn.waitedFor ?? null, other_down_finished: !turn.unfinished } : {}) };
        for (const w of warnings) process.stderr.write(`swarm down: warning: ${w}\n`);
        if (o.json) process.stdout.write(JSON.stringify(result) + '\n');
        else {
          process.stdout.write(byLock !== undefined ? `swarm down: stopped the hub (pid ${byLock}) found by the state directory's lock: its hub.json was missing or damaged${clean ? '' : ' (forced)'}${left.length ? `, ${left.length} leftover process(es) killed` : ''}\n`
            : hub ? `swarm down: stopped${starting.hub ? ' (it was starting)' : ''}${clean ? '' : ' (forced)'}${left.length ? `, ${left.length} leftover process(es) killed` : ''}\n`
            : starting.left.length ? `swarm down: a swarm was starting in ${dir} and not up after ${o.timeout} ms: its \`swarm up\` (pid ${starting.left.map((p) => p.pid).join(', ')}) stopped\n`
            : unseen.length ? `swarm down: a swarm was starting in ${dir} from a pid namespace not visible from here and had no hub after ${o.timeout} ms: not stopped\n`
              : turn.waited ? `swarm down: the swarm in ${dir} was stopped by another \`swarm down\`${turn.waitedFor ? ` (pid ${turn.waitedFor})` : ''}, which this one waited for${turn.unfinished ? ' (it ended before it finished; this one finished the stop)' : ''}${left.length ? `; ${left.length} leftover process(es) killed` : ''}\n`
                : `swarm down: no swarm was running in ${dir}${left.length ? `; ${left.length} leftover process(es) killed` : ''}\n`);
          if (lockLeft) process.stdout.write(`swarm down: a hub is still starting in ${dir} (it holds the state directory's lock); run \`swarm down\` again\n`);
          if (foreign.length) process.stdout.write(`swarm down: left alone pid(s) ${foreign.join(', ')}: pid files name processes this swarm cannot prove it started\n`);
        }
        process.exit(remaining ? 1 : 0);
      } catch (err) { fail(err, o.json); }
    });
}

/**
 * Wait (at most `ms`) for a starting swarm's hub.json: a `swarm up` marked as starting or a hub that
 * holds the directory's lock is a swarm on its way. Returns its hub once written, or the `swarm up`
 * processes still starting (`unseen`: marks of a pid namespace this one cannot see, which are waited
 * for as any, and whose hub is judged by its answer).
 */
async function awaitStarting(dir: string, ms: number): Promise<{ hub?: HubFile; left: ProcId[]; unseen?: { rec: ProcId; file: string }[] }> {
  const deadline = Date.now() + ms;
  for (;;) {
    const hub = await startedHub(dir);
    if (hub) return { hub, left: [] };
    const { live, unseen } = startingProcs(dir);
    // The hub may have written hub.json between the two reads: look once more.
    if (!live.length && !unseen.length && !await lockHeld(dir)) return { hub: await startedHub(dir), left: [] };
    if (Date.now() >= deadline) return { left: live, unseen };
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The hub hub.json names if it runs: ours by its process, or one of an unseen pid namespace by its answer. */
async function startedHub(dir: string): Promise<HubFile | undefined> {
  const file = readHubFile(dir);
  return ourHub(file) ?? (file && hubUnseen(file) && await hubAnswers(file, 1000) ? file : undefined);
}

/** hub.json's hub if its pid is still that hub (one whose pid now belongs to another process is stale). */
function ourHub(file: HubFile | undefined): HubFile | undefined { return file && hubIsOurs(file) ? file : undefined; }

/** Whether the hub still runs: its process (`pid`: its pid here, once found), or where this namespace cannot see it, its answer. */
async function hubRuns(h: HubFile, pid = hubPid(h)): Promise<boolean> {
  if (pid !== undefined) return isSameProcess({ pid, start: h.proc_start });
  return hubUnseen(h) && await hubAnswers(h, 1000);
}

/**
 * The processes the pid files name, once each (a process of several workers is named by each one's
 * file): by pid and the namespace it is of, since two namespaces (a container's and the host's) each
 * have their own process with a given pid.
 */
function namedPids(dir: string): ProcId[] {
  const key = (r: ProcId): string => `${r.pidns ?? pidNamespace() ?? ''} ${r.pid}`;
  return [...new Map(pidFiles(dir).flatMap((p): [string, ProcId][] => { const r = readPidFile(p.file); return r ? [[key(r), r]] : []; })).values()];
}

/** Those still the processes this swarm started, with their pids as this namespace numbers them. */
function ourPids(dir: string): ProcId[] { return namedPids(dir).flatMap((r) => localProcess(r) ?? []); }

/**
 * Whatever survived (a killed hub leaves its workers): stopped by pid files, but only the processes
 * they name that are still the ones this swarm started (`left`: those it signalled). `foreign`: live
 * pids the files name that it cannot prove it started; `old`: those of them whose files have no start time.
 */
async function stopLeftovers(dir: string): Promise<{ left: ProcId[]; foreign: number[]; old: number[] }> {
  const left = ourPids(dir);
  // A pid of another namespace says nothing of the process with that pid here: not named as foreign.
  const foreignRecs = namedPids(dir).filter((r) => inThisNamespace(r) && alive(r.pid) && !isSameProcess(r));
  for (const p of left) killGroup(p.pid, 'SIGTERM');
  await until(() => left.every((p) => !isSameProcess(p)), 3000);
  for (const p of left) if (isSameProcess(p)) killGroup(p.pid, 'SIGKILL');
  await until(() => left.every((p) => !isSameProcess(p)), 3000);
  return { left, foreign: foreignRecs.map((r) => r.pid), old: foreignRecs.filter(isOldFormat).map((r) => r.pid) };
}

async function until(cond: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) { if (await cond()) return true; await new Promise((r) => setTimeout(r, 25)); }
  return cond();
}
