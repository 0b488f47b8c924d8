import { z } from 'zod';
import { DEFAULT_MAX_LINE } from '../protocol/types.js';
import { MAX_LINE } from '../protocol/bounds.js';
import { ORPHAN_EXIT_DEFAULT_MS, ORPHAN_EXIT_MAX_MS } from './orphan-bounds.js';

/**
 * Worker settings: one strict schema with defaults, the definition worker/config.ts checks against
 * through the code protocol/gen-validators.ts compiles from it (worker processes load no zod: it cost
 * 300-500 ms of a worker's start on this machine). Bounds that follow from others are computed in
 * config.ts, not set here.
 */
const MiB = 1024 * 1024;
const n = (min: number, max: number, dflt: number): z.ZodDefault<z.ZodNumber> => z.number().int().min(min).max(max).default(dflt);
/** A group: unknown names are refused; left out, it is all defaults. */
const group = <S extends z.ZodRawShape>(shape: S) => z.object(shape).strict().prefault({} as z.input<z.ZodObject<S, z.core.$strict>>);

export const WorkerConfigSchema = z.object({
  agent: group({
    slots: n(1, 1024, 1),
    /** TASK_REQs held queued beyond the slots (HANDSHAKE `queue`); the hub uses them for short tasks only. */
    queue: n(0, 64, 8),
    /** A queued task not started within this long is given back (SLOTS_FULL): a long task is ahead of it. */
    queueHoldMs: n(1, 600_000, 50),
    /** The same output line more often than this is a loop (SWARM_ERR_LOOP_DETECTED). */
    loopRepeats: n(1, 10_000, 5),
    /** Longest protocol line to the hub, bytes. */
    maxLine: n(1024, MAX_LINE, DEFAULT_MAX_LINE),
  }),
  client: group({
    handshakeTimeoutMs: n(100, 600_000, 5000),
    /** Reconnect backoff bounds (jittered by p-retry). */
    minBackoffMs: n(1, 600_000, 100),
    maxBackoffMs: n(1, 600_000, 2000),
    /**
     * A worker whose parent process is gone, that reaches no hub and sees no failover peer that is not
     * orphaned too, for this long, exits (worker/orphan.ts); 0: never. Members that see a peer with a
     * parent or a hub ride out any hub outage.
     */
    orphanExitMs: n(0, ORPHAN_EXIT_MAX_MS, ORPHAN_EXIT_DEFAULT_MS),
  }),
  hubMonitor: group({
    /** Hub silence before it is suspected (the spec's 3 s). */
    lapseMs: n(200, 600_000, 3000),
    /** Suspicion bounds: max with no peer confirming, min once `askPeers` confirm (Lifeguard). */
    suspicionMinMs: n(0, 600_000, 500),
    suspicionMaxMs: n(0, 600_000, 3000),
    askPeers: n(0, 100, 3),
  }),
  coordinator: group({
    dispatchIntervalMs: n(1, 60_000, 100),
    /**
     * A new coordinator waits this long for fresher state before dispatching. The hub replicates every
     * change as it happens, so replicas are current at failover: what arrives later costs at most a re-run.
     */
    catchUpMs: n(0, 60_000, 50),
    /** An assignment not acknowledged within this long is sent again. */
    resendMs: n(1, 60_000, 1000),
    /** After this many unanswered sends the lease is handed back. */
    maxSends: n(1, 1000, 5),
    /**
     * A gap this much longer than the dispatch interval between two of the coordinator's ticks is its
     * own process stalling (SIGSTOP, swap, a starved loop): leases it takes back soon after are its
     * fault, not the task's, and use no attempt. Below the members' shortest suspicion time (~2 s).
     */
    stallGapMs: n(100, 600_000, 2000),
  }),
  sync: group({
    /** Anti-entropy round with one random live peer (the agent runs 1 s; sims run the default). */
    syncIntervalMs: n(1, 600_000, 2000),
    digestPerChunk: n(1, 100_000, 2000),
    /** Bound on one entries message between peers (the transport's frame bound is larger). */
    maxChunkBytes: n(1024, 64 * MiB, 256 * 1024),
  }),
  transport: group({
    maxFrame: n(1024, 256 * MiB, 4 * MiB),
    maxConns: n(1, 10_000, 32),
    maxBuffered: n(1024, 1024 * MiB, 8 * MiB),
    downMs: n(0, 600_000, 500),
    idleMs: n(100, 3_600_000, 10_000),
  }),
  handback: group({
    /** Entries per HANDBACK frame at most. */
    chunk: n(1, 100_000, 100),
    /** Ids per offer frame (ids are at most 128 characters). */
    offerChunk: n(1, 100_000, 4000),
    timeoutMs: n(100, 3_600_000, 15_000),
  }),
}).strict();
