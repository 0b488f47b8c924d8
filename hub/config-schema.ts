import { z } from 'zod';
import { DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS } from '../sched/index.js';
import { DEFAULT_MAX_LINE, DEFAULT_MAX_OUTBOUND } from '../protocol/types.js';
import { DEFAULT_RETAIN, MAX_RETAIN_BYTES, MAX_RETAIN_COUNT, MAX_RETAIN_MS } from './retention.js';
import { DEFAULT_ARCHIVE_BOUND, MAX_ARCHIVE_BYTES, MIN_ARCHIVE_BYTES } from './archive-bound.js';
import { DEFAULT_COMPACT_BYTES } from './journal.js';
import { DEFAULT_LEASE_AHEAD_MS } from './lease-ahead.js';
import { DEFAULT_MAX_CONTROL_CONNECTIONS, DEFAULT_MAX_WORKER_LINKS } from './conn-caps.js';
import { MAX_ATTEMPTS, MAX_DEFAULT_TOKENS, MAX_LINE, MAX_PREFETCH_BELOW_MS } from '../protocol/bounds.js';

/**
 * The hub's settings as a zod schema: read by the build (protocol/gen-validators.ts), which compiles
 * it to gen/hub-config-check.js, and by the type of HubConfig. The hub itself never loads zod (about
 * 75 ms of CPU at every start, on the way to a restarted hub's replay).
 */
export const HubConfigSchema = z.object({
  host: z.string().default('127.0.0.1'),
  port: z.number().int().min(0).max(65535).default(0),
  controlHost: z.string().default('127.0.0.1'),
  controlPort: z.number().int().min(0).max(65535).default(0),
  token: z.string().min(8).optional(),
  tlsCert: z.string().optional(),
  tlsKey: z.string().optional(),
  /** Workers must present a certificate signed by this CA (mutual TLS on the worker port). */
  tlsCa: z.string().optional(),
  stateDir: z.string().optional(),
  heartbeatMs: z.number().int().positive().default(2000),
  deadAfterMs: z.number().int().positive().default(10000),
  handshakeTimeoutMs: z.number().int().positive().default(5000),
  maxLine: z.number().int().min(1024).max(MAX_LINE).default(DEFAULT_MAX_LINE),
  /**
   * Bound on bytes waiting to go out to one worker; past it the link is cut (a peer that reads
   * nothing). Replication paces itself under it: large transfers wait for the socket to drain.
   */
  maxOutbound: z.number().int().min(64 * 1024).default(DEFAULT_MAX_OUTBOUND),
  /**
   * Connections the worker port and the control API accept at once; past them a new one is closed at
   * accept (counted, logged rate-limited). Both are lowered at start to fit the process's open-files
   * limit less a reserve (hub/conn-caps.ts).
   */
  maxWorkerLinks: z.number().int().min(1).max(10_000_000).default(DEFAULT_MAX_WORKER_LINKS),
  maxControlConnections: z.number().int().min(1).max(10_000_000).default(DEFAULT_MAX_CONTROL_CONNECTIONS),
  maxQueue: z.number().int().positive().default(1_000_000),
  /** Lease length of a task without its own timeout_ms; the acting coordinator uses it too after a failover. */
  leaseMs: z.number().int().positive().default(DEFAULT_LEASE_MS),
  /** Leases of a task without its own max_attempts; the acting coordinator uses it too after a failover. */
  maxAttempts: z.number().int().positive().max(MAX_ATTEMPTS).default(DEFAULT_MAX_ATTEMPTS),
  /** max_tokens of a task that gives none (set at submit, so replicas and a restarted hub see it too). */
  defaultMaxTokens: z.number().int().positive().max(MAX_DEFAULT_TOKENS).default(512),
  /**
   * `always`: tasks and results are acknowledged and shown only once fsynced (one fsync per group
   * commit). `interval`: once written, with fsync every `fsyncMs` (a power loss can lose that much).
   */
  fsync: z.enum(['always', 'interval']).default('always'),
  fsyncMs: z.number().int().min(0).default(1000),
  /** Retention horizon: finished tasks older than this (ms) leave the hot state for the results archive. */
  retainMs: z.number().int().positive().max(MAX_RETAIN_MS).default(DEFAULT_RETAIN.ageMs),
  /** Retention horizon: at most this many finished tasks stay hot (memory, journal, replicas). */
  retainCount: z.number().int().positive().max(MAX_RETAIN_COUNT).default(DEFAULT_RETAIN.count),
  /** Retention horizon: at most this many bytes of finished tasks stay hot (hub/retention-bytes.ts counts them). */
  retainBytes: z.number().int().positive().max(MAX_RETAIN_BYTES).default(DEFAULT_RETAIN.bytes),
  /**
   * The results archive's bound (hub/archive-bound.ts): the oldest whole files are removed once the
   * archive holds more than this many bytes (0: no byte bound) ...
   */
  archiveMaxBytes: z.number().int().min(0).max(MAX_ARCHIVE_BYTES).refine((n) => n === 0 || n >= MIN_ARCHIVE_BYTES, 'at least 1 MiB, or 0 (no byte bound)').default(DEFAULT_ARCHIVE_BOUND.bytes),
  /** ... or once a file's last line is older than this many ms (0: no age bound). */
  archiveMaxAgeMs: z.number().int().min(0).max(MAX_RETAIN_MS).default(DEFAULT_ARCHIVE_BOUND.ageMs),
  /** Compact the journal (snapshot + fresh segment) once its live segment passes this size. */
  compactBytes: z.number().int().min(4096).default(DEFAULT_COMPACT_BYTES),
  /**
   * Lease a worker its HANDSHAKE `queue` of tasks beyond its slots while the mean run time of its
   * recent tasks is under this many ms (0: never). Short tasks then cost one wake per batch of
   * frames instead of one per task; LLM tasks (seconds) never qualify.
   */
  prefetchBelowMs: z.number().min(0).max(MAX_PREFETCH_BELOW_MS).default(5),
  /**
   * Lease a busy worker with a queue place its next task this many ms before its running one ends, while
   * tasks wait that no free worker takes: the worker (and the batched engine, behind the running chat)
   * starts it the moment its last one ends, without the round trip through the hub. A worker with the
   * cap `ends-soon` says when (its engine counts the tokens left); others only with leaseAheadByMean.
   * 0: never.
   */
  leaseAheadMs: z.number().min(0).max(MAX_PREFETCH_BELOW_MS).default(DEFAULT_LEASE_AHEAD_MS),
  /**
   * Also lease ahead workers that do not say when a task ends, by the mean run time of their recent
   * tasks: that guess missed a short task's end by more than the worker's hold for most tasks under
   * load, so each came back unstarted (a TASK_REQ and an ERROR more). Off unless asked for.
   */
  leaseAheadByMean: z.boolean().default(false),
  /** Offer msgpack to workers. Off by default: NDJSON (the spec's codec) measured faster for our frames. */
  msgpack: z.boolean().default(false),
  /** Role plan: how many workers should hold each role (hub/roles.ts); handed out with ASSIGN_ROLE. */
  roles: z.record(z.string(), z.number().int().min(0)).optional(),
}).strict();
