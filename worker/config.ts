import { DEFAULT_MAX_LINE, SwarmError } from '../protocol/index.js';

/**
 * Worker settings: one strict table with defaults, validated once, frozen; bounds that follow from
 * others are computed here, not copied by hand. Not zod like the hub's config: worker processes do
 * without zod (importing it cost 300-500 ms of a worker's start on this machine).
 */

type Range = readonly [min: number, max: number, dflt: number];
const MiB = 1024 * 1024;

/** Every tunable number, by group: [min, max, default]. */
const TABLE = {
  agent: {
    slots: [1, 1024, 1],
    /** TASK_REQs held queued beyond the slots (HANDSHAKE `queue`); the hub uses them for short tasks only. */
    queue: [0, 64, 8],
    /** A queued task not started within this long is given back (SLOTS_FULL): a long task is ahead of it. */
    queueHoldMs: [1, 600_000, 50],
    /** The same output line more often than this is a loop (SWARM_ERR_LOOP_DETECTED). */
    loopRepeats: [1, 10_000, 5],
    /** Longest protocol line to the hub, bytes. */
    maxLine: [1024, 64 * MiB, DEFAULT_MAX_LINE],
  },
  client: {
    handshakeTimeoutMs: [100, 600_000, 5000],
    /** Reconnect backoff bounds (jittered by p-retry). */
    minBackoffMs: [1, 600_000, 100],
    maxBackoffMs: [1, 600_000, 2000],
  },
  hubMonitor: {
    /** Hub silence before it is suspected (the spec's 3 s). */
    lapseMs: [200, 600_000, 3000],
    /** Suspicion bounds: max with no peer confirming, min once `askPeers` confirm (Lifeguard). */
    suspicionMinMs: [0, 600_000, 500],
    suspicionMaxMs: [0, 600_000, 3000],
    askPeers: [0, 100, 3],
  },
  coordinator: {
    dispatchIntervalMs: [1, 60_000, 100],
    /**
     * A new coordinator waits this long for fresher state before dispatching. The hub replicates every
     * change as it happens, so replicas are current at failover: what arrives later costs at most a re-run.
     */
    catchUpMs: [0, 60_000, 50],
    /** An assignment not acknowledged within this long is sent again. */
    resendMs: [1, 60_000, 1000],
    /** After this many unanswered sends the lease is handed back. */
    maxSends: [1, 1000, 5],
  },
  sync: {
    /** Anti-entropy round with one random live peer (the agent runs 1 s; sims run the default). */
    syncIntervalMs: [1, 600_000, 2000],
    digestPerChunk: [1, 100_000, 2000],
    /** Bound on one entries message between peers (the transport's frame bound is larger). */
    maxChunkBytes: [1024, 64 * MiB, 256 * 1024],
  },
  transport: {
    maxFrame: [1024, 256 * MiB, 4 * MiB],
    maxConns: [1, 10_000, 32],
    maxBuffered: [1024, 1024 * MiB, 8 * MiB],
    downMs: [0, 600_000, 500],
    idleMs: [100, 3_600_000, 10_000],
  },
  handback: {
    /** Entries per HANDBACK frame at most. */
    chunk: [1, 100_000, 100],
    /** Ids per offer frame (ids are at most 128 characters). */
    offerChunk: [1, 100_000, 4000],
    timeoutMs: [100, 3_600_000, 15_000],
  },
} as const satisfies Record<string, Record<string, Range>>;

type Table = typeof TABLE;
type Group<G extends keyof Table> = { -readonly [K in keyof Table[G]]: number };

/** Settings as given: any group, any field, may be left out. */
export type WorkerConfigInput = { [G in keyof Table]?: Partial<Group<G>> };

/** Settings as used: every field set, derived bounds added, frozen. */
export interface WorkerConfig {
  readonly agent: Readonly<Group<'agent'>>;
  readonly client: Readonly<Group<'client'>>;
  /** `vetoWithinMs` is derived: half the lapse (a peer that heard the hub that recently vetoes a failover). */
  readonly hubMonitor: Readonly<Group<'hubMonitor'> & { vetoWithinMs: number }>;
  readonly coordinator: Readonly<Group<'coordinator'>>;
  readonly sync: Readonly<Group<'sync'>>;
  readonly transport: Readonly<Group<'transport'>>;
  /** `bytes` is derived: half the line limit, so a HANDBACK frame's entries and envelope fit one line. */
  readonly handback: Readonly<Group<'handback'> & { bytes: number }>;
}

const bad = (path: string, why: string) => new SwarmError('SWARM_ERR_CONFIG', `worker setting ${path}: ${why}`);

/** Validate worker settings (unknown names are errors), fill defaults, derive bounds, freeze. */
export function workerConfig(input: WorkerConfigInput = {}): WorkerConfig {
  if (!input || typeof input !== 'object') throw bad('(root)', 'not an object');
  const out: Record<string, Record<string, number>> = {};
  for (const g of Object.keys(input)) if (!(g in TABLE)) throw bad(g, 'unknown group');
  for (const [g, fields] of Object.entries(TABLE) as [keyof Table, Record<string, Range>][]) {
    const given = (input[g] ?? {}) as Record<string, unknown>;
    for (const k of Object.keys(given)) if (!(k in fields)) throw bad(`${g}.${k}`, 'unknown setting');
    const grp: Record<string, number> = {};
    for (const [k, [min, max, dflt]] of Object.entries(fields)) {
      const v = given[k] ?? dflt;
      if (typeof v !== 'number' || !Number.isInteger(v)) throw bad(`${g}.${k}`, `expected an integer, got ${JSON.stringify(v)}`);
      if (v < min || v > max) throw bad(`${g}.${k}`, `${v} is outside ${min}..${max}`);
      grp[k] = v;
    }
    out[g] = grp;
  }
  const c = out as unknown as { -readonly [G in keyof WorkerConfig]: { -readonly [K in keyof WorkerConfig[G]]: number } };
  if (c.client.minBackoffMs > c.client.maxBackoffMs) throw bad('client.minBackoffMs', 'above client.maxBackoffMs');
  if (c.hubMonitor.suspicionMinMs > c.hubMonitor.suspicionMaxMs) throw bad('hubMonitor.suspicionMinMs', 'above hubMonitor.suspicionMaxMs');
  c.hubMonitor.vetoWithinMs = Math.floor(c.hubMonitor.lapseMs / 2);
  c.handback.bytes = Math.floor(c.agent.maxLine / 2);
  for (const g of Object.values(c)) Object.freeze(g);
  return Object.freeze(c);
}

/** The defaults, for parts built without a config (tests, sims). */
export const WORKER_DEFAULTS: WorkerConfig = workerConfig();

/** `defaults` with the fields `given` sets (undefined leaves a default alone). */
export function withDefaults<T extends object>(defaults: Readonly<T>, given: Partial<T> | undefined): T {
  const out = { ...defaults } as T;
  if (given) for (const [k, v] of Object.entries(given)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
