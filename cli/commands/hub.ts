import { InvalidArgumentError, Option, type Command } from 'commander';
import { warnIfPid1 } from '../pid1.js';
// roles.ts directly, not hub/index.js: `swarm up` imports this file for its options, and the hub's
// index loads all of the hub (~170 ms of CPU before `up` can start the hub process).
import { parseRolePlan, type RolePlan } from '../../hub/roles.js';
import { DEFAULT_RETAIN, parseRetain, retainString, type RetainOptions } from '../../hub/retention.js';
import { DEFAULT_ARCHIVE_BOUND, archiveMaxString, describeArchiveBound, parseArchiveMax, type ArchiveBound } from '../../hub/archive-bound.js';
import { DEFAULT_MAX_ATTEMPTS } from '../../sched/retry.js';
import { DEFAULT_LEASE_AHEAD_MS } from '../../hub/lease-ahead.js';
import { fail } from '../exit.js';
import { DEFAULT_MAX_CONTROL_CONNECTIONS, DEFAULT_MAX_WORKER_LINKS } from '../../hub/conn-caps.js';
import { int, keyValue } from '../options.js';
import { formatBytes } from '../../protocol/bytes.js';
import { MAX_ATTEMPTS, MAX_DEFAULT_TOKENS, MAX_LINE, MAX_PREFETCH_BELOW_MS, MAX_SLOTS } from '../../protocol/bounds.js';
import { envToken, stateDir, swarmToken } from '../state.js';
import { readiness, reportReady } from '../ready.js';
import { ORPHAN_EXIT_HELP, workerArgs } from './worker.js';
import { ORPHAN_EXIT_MAX_MS } from '../../worker/orphan-bounds.js';
import { DEFAULT_DRIVER, chooseModel } from '../model.js';
import { PROCS_HELP, parseProcs, type Procs } from '../procs.js';
import { DEFAULT_ENGINE, engineDriver, parseEngineMode, type EngineMode } from '../shared-engine.js';
import { pemFile, capsList } from '../file-option.js';

/** Options shared by `swarm hub` and `swarm up`. */
export function hubOptions(cmd: Command): Command {
  return cmd
    .option('--host <addr>', 'address workers connect to (non-loopback needs --token)', '127.0.0.1')
    .option('--port <n>', 'worker port (0 = any free port; a restart reuses the previous one)', int('--port', 0, 65535), 0)
    .option('--control-port <n>', 'HTTP control API port on loopback (0 = any)', int('--control-port', 0, 65535), 0)
    .option('--control-host <addr>', 'serve the control API on this address (off loopback: HTTPS with --tls-cert, and --token)', '127.0.0.1')
    .option('--token <secret>', 'shared secret workers must present (env SWARM_TOKEN; default: the state directory\'s, generated on first use and stored 0600 in <state-dir>/token)')
    .option('--insecure-no-auth', 'accept any worker and control client without a token (loopback only; every local user can then read prompts, join as a worker and stop the hub)', false)
    .option('--tls-cert <file>', 'TLS certificate for worker links', pemFile)
    .option('--tls-key <file>', 'TLS private key for worker links', pemFile)
    .option('--tls-ca <file>', 'mutual TLS: workers must present a certificate signed by this CA', pemFile)
    .option('--state-dir <dir>', 'journal, logs, pids and the hub address (env SWARM_STATE_DIR, default ./.swarm)')
    .option('--heartbeat-ms <n>', 'heartbeat interval', int('--heartbeat-ms', 10), 2000)
    .option('--dead-after-ms <n>', 'a worker silent this long is dead', int('--dead-after-ms', 100), 10000)
    .option('--max-line <bytes>', 'maximum protocol line length', int('--max-line', 1024, MAX_LINE), 1024 * 1024)
    .option('--max-attempts <n>', 'attempts per task before it fails', int('--max-attempts', 1, MAX_ATTEMPTS), DEFAULT_MAX_ATTEMPTS)
    .option('--max-tokens <n>', 'max_tokens of a task that gives none (a bound on every generation; a task may ask for more)', int('--max-tokens', 1, MAX_DEFAULT_TOKENS), 512)
    .option('--prefetch-below-ms <ms>', 'lease a worker its queue (beyond its slots) while its tasks run under this long on average; 0: never', int('--prefetch-below-ms', 0, MAX_PREFETCH_BELOW_MS), 5)
    .option('--lease-ahead-ms <ms>', `lease a busy worker its next task this long before its running one ends (while tasks wait that no free worker takes), so it starts without a round trip; auto: ${DEFAULT_LEASE_AHEAD_MS} ms for workers whose engine says when a task ends (the batched engine), none for others; a number: also the others, by their mean run time; 0: never`, leaseAheadOption, 'auto')
    .option('--max-worker-links <n>', `connections the worker port accepts at once (each an open file); lowered at start to fit ulimit -n less a reserve`, int('--max-worker-links', 1, 10_000_000), DEFAULT_MAX_WORKER_LINKS)
    .option('--max-control-connections <n>', `connections the control API accepts at once (dashboards, status, submit --wait and /wait); lowered likewise`, int('--max-control-connections', 1, 10_000_000), DEFAULT_MAX_CONTROL_CONNECTIONS)
    .option('--no-journal', 'keep tasks in memory only (nothing survives a restart)')
    .option('--fsync <mode>', 'always: acknowledge tasks and show results only once fsynced (group commit); interval: fsync once a second (a power loss can lose up to 1 s of acknowledged work)', fsyncMode, 'always')
    .option('--msgpack', 'offer msgpack to workers (NDJSON is the default: measured faster for these small frames)', false)
    .option('--no-msgpack', 'speak NDJSON only (the default; kept for scripts)')
    .option('--roles <plan>', 'hand out roles to the workers that join, e.g. thinker=2,worker=3 (ASSIGN_ROLE)', rolePlanOption)
    .option('--retain <age>,<count>,<bytes>', `finished tasks stay in the hot state (memory, journal, replicas) this long, this many and this many bytes (prompts and results; units B, KB, MB, GB, KiB, MiB, GiB), then move to the results archive (swarm results), oldest first; each part optional; default ${DEFAULT_RETAIN.ageMs / 3600_000}h,${DEFAULT_RETAIN.count},${formatBytes(DEFAULT_RETAIN.bytes).replace(' ', '')}`, retainOption)
    .option('--archive-max <bytes>[,<age>]', `keep the results archive (swarm results) under this many bytes on disk and/or this age: its oldest whole files are removed past it (a task whose record went answers failed, SWARM_ERR_RESULT_PRUNED); e.g. 2GiB, 512MiB,30d, ,90d, off (keep everything); default ${describeArchiveBound(DEFAULT_ARCHIVE_BOUND).replace(' ', '')}`, archiveMaxOption);
}

export interface HubCliOptions {
  host: string; port: number; controlPort: number; controlHost?: string; token?: string; tlsCert?: string; tlsKey?: string; tlsCa?: string;
  stateDir?: string; heartbeatMs: number; deadAfterMs: number; maxLine: number; maxAttempts: number; maxTokens: number; prefetchBelowMs: number; leaseAheadMs: number | 'auto';
  journal: boolean; msgpack: boolean; roles?: RolePlan; insecureNoAuth: boolean; fsync: 'always' | 'interval'; retain?: RetainOptions;
  archiveMax?: ArchiveBound; maxWorkerLinks: number; maxControlConnections: number;
}

function leaseAheadOption(v: string): number | 'auto' {
  if (v.trim() === 'auto') return 'auto';
  try { return int('--lease-ahead-ms', 0, MAX_PREFETCH_BELOW_MS)(v); } catch {
    throw new InvalidArgumentError(`--lease-ahead-ms is auto or an integer from 0 to ${MAX_PREFETCH_BELOW_MS} (ms)`);
  }
}

function retainOption(v: string): RetainOptions {
  // The CLI names the code once in front of commander's message; the reason alone goes inside.
  try { return parseRetain(v); } catch (err) { throw new InvalidArgumentError((err as Error).message); }
}

function archiveMaxOption(v: string): ArchiveBound {
  try { return parseArchiveMax(v); } catch (err) { throw new InvalidArgumentError((err as Error).message); }
}

/** `--archive-max` as given to a detached hub. */
export function archiveMaxArg(b: ArchiveBound | undefined): string[] { return b ? ['--archive-max', archiveMaxString(b)] : []; }

/** `--retain` as given to a detached hub. */
export function retainArg(r: RetainOptions | undefined): string[] { return r ? ['--retain', retainString(r)] : []; }

function fsyncMode(v: string): 'always' | 'interval' {
  if (v !== 'always' && v !== 'interval') throw new InvalidArgumentError('expected always or interval');
  return v;
}

function rolePlanOption(v: string): RolePlan {
  try { return parseRolePlan(v); } catch (err) { throw new InvalidArgumentError((err as Error).message); }
}

/**
 * The token a hub on `dir` runs with: always one (given, stored, or generated and stored), unless
 * --insecure-no-auth asks for none, which is said loudly.
 */
export function hubToken(o: HubCliOptions, dir: string): string | undefined {
  if (o.insecureNoAuth) {
    process.stderr.write('swarm: warning: --insecure-no-auth: any local user can join as a worker, read prompts and results, and stop the hub\n');
    return undefined;
  }
  return swarmToken(dir, o.token ?? envToken());
}

export function hubConfigFrom(o: HubCliOptions, token: string | undefined) {
  return {
    host: o.host, port: o.port, controlPort: o.controlPort, token, maxWorkerLinks: o.maxWorkerLinks, maxControlConnections: o.maxControlConnections,
    ...(o.controlHost ? { controlHost: o.controlHost } : {}), ...(o.tlsCa ? { tlsCa: o.tlsCa } : {}),
    tlsCert: o.tlsCert, tlsKey: o.tlsKey, heartbeatMs: o.heartbeatMs, deadAfterMs: o.deadAfterMs,
    maxLine: o.maxLine, maxAttempts: o.maxAttempts, defaultMaxTokens: o.maxTokens, prefetchBelowMs: o.prefetchBelowMs,
    leaseAheadMs: o.leaseAheadMs === 'auto' ? DEFAULT_LEASE_AHEAD_MS : o.leaseAheadMs, leaseAheadByMean: o.leaseAheadMs !== 'auto' && o.leaseAheadMs > 0, msgpack: o.msgpack, roles: o.roles, fsync: o.fsync,
    ...(o.retain ? { retainMs: o.retain.ageMs, retainCount: o.retain.count, ...(o.retain.bytes !== undefined ? { retainBytes: o.retain.bytes } : {}) } : {}),
    ...(o.archiveMax ? { archiveMaxBytes: o.archiveMax.bytes, archiveMaxAgeMs: o.archiveMax.ageMs } : {}),
  };
}

export function registerHub(program: Command): void {
  const cmd = program.command('hub').description('run the hub alone (workers join with `swarm worker`)');
  hubOptions(cmd)
    .option('--supervise <n>', 'also start and supervise N local workers', int('--supervise'), 0)
    .option('--procs <n>', PROCS_HELP, parseProcs, 'auto')
    .option('--driver <name>', 'driver for supervised workers', DEFAULT_DRIVER)
    .option('--driver-opt <key=value>', 'driver option for supervised workers (repeatable)', keyValue, {})
    .option('--model <path>', 'model for supervised workers: GGUF file or hf: URI (env SWARM_MODEL; default: the random-weight demo model)')
    .option('--slots <n>', 'tasks in flight per supervised worker', int('--slots', 1, MAX_SLOTS), 1)
    .option('--caps <list>', 'capabilities of the supervised workers (comma-separated)', capsList)
    .option('--engine <mode>', 'supervised workers: batched (one llama.cpp engine, a sequence each), per-worker engines, or one shared llama-server', parseEngineMode, DEFAULT_ENGINE)
    .option('--failover', 'supervised workers keep a replica and finish the run by gossip if the hub dies', false)
    .option('--orphan-exit-ms <ms>', `supervised workers: ${ORPHAN_EXIT_HELP}`, int('--orphan-exit-ms', 0, ORPHAN_EXIT_MAX_MS))
    .option('--log-file <file>', 'write logs here instead of stderr')
    .addOption(new Option('--ready-fd <fd>', 'report the number of connected workers on this fd (used by `swarm up --detach`)').argParser(int('--ready-fd')).hideHelp())
    .action(async (o: HubCliOptions & { supervise: number; procs: Procs; driver: string; driverOpt: Record<string, string>; model?: string; slots: number; caps?: string; logFile?: string; engine: EngineMode; failover: boolean; readyFd?: number; orphanExitMs?: number }) => {
      try {
        // Loaded here, not at the top: `swarm up` imports this file for its options only.
        const [{ makeLogger }, { runHub }, { boundHeapGrowth }, mem] = await Promise.all([import('../log.js'), import('../run-hub.js'), import('../../hub/store-heap.js'), import('../../hub/heap-limit.js')]);
        const dir = stateDir(o.stateDir);
        const token = hubToken(o, dir);
        const log = makeLogger('hub', o.logFile);
        warnIfPid1(log);
        const limit = mem.memoryLimit(), heap = mem.heapLimit();
        const heapWarning = mem.heapLimitWarning(heap, limit);
        if (heapWarning) log.warn({ heap_limit_mib: Math.round(heap / 2 ** 20), memory_limit_mib: limit && Math.round(limit / 2 ** 20) }, heapWarning);
        // Resolved once for all supervised workers (none when the hub supervises none).
        const model = o.supervise > 0 ? await chooseModel(o.driver, o.model) : { path: o.model };
        const running = await runHub({
          dir, log, config: hubConfigFrom(o, token), agents: o.supervise, procs: o.procs, journal: o.journal,
          workerArgs: workerArgs({ ...engineDriver(o.engine, o.driver, o.driverOpt, o.supervise, o.slots), model: model.path, slots: o.slots, failover: o.failover, caps: o.caps, tlsCert: o.tlsCert, tlsKey: o.tlsKey, orphanExitMs: o.orphanExitMs, maxLine: o.maxLine }),
          sharedEngine: o.engine === 'shared' ? { model: model.path, slotsPerWorker: o.slots } : undefined,
          // Started by `swarm up -d` (it gives --ready-fd): up waited for a `down` before it marked its
          // start, and a `down` begun since waits for this hub's hub.json; waiting here too, each would wait for the other.
          ...(o.readyFd === undefined ? { awaitDown: (pid: number | undefined) => process.stderr.write(`swarm hub: a \`swarm down\`${pid ? ` (pid ${pid})` : ''} is stopping the swarm in ${dir}: waiting for it to finish\n`) } : {}),
        });
        // Bounded once the journal is replayed: the replay builds the whole hot state at once, and at
        // 1.5x growth it ran five full collections instead of two (0.3 s of pauses against 0.04 s, 1M tasks of history).
        boundHeapGrowth();
        if (o.readyFd !== undefined) reportReady(o.readyFd, () => readiness(running.hub.registry.all()), o.supervise);
        const onSignal = () => void running.stop();
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        await running.stopped;
        process.exit(0);
      } catch (err) { fail(err); }
    });
}
