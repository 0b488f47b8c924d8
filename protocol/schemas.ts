import { z } from 'zod';
import { Codec, PROTOCOL_VERSION, Type } from './types.js';
import { ErrorCode } from './errors.js';
import { MAX_ATTEMPTS, MAX_CAPS, MAX_ID, MAX_QUEUE, MAX_SHORT_TEXT, MAX_SLOTS, MAX_TOKEN } from './bounds.js';
import { HAVE_MAX_SUB_BUCKETS } from './replica-have.js';

const id = z.string().min(1).max(MAX_ID);
const shortText = z.string().max(MAX_SHORT_TEXT);

/** Task receipt, carried by the final TASK_RES (`done:true`). */
export const Receipt = z.object({
  started_at: z.number().optional(),
  finished_at: z.number().optional(),
  duration_ms: z.number().nonnegative(),
  ttft_ms: z.number().nonnegative().optional(),
  tokens_in: z.number().int().nonnegative().optional(),
  tokens_out: z.number().int().nonnegative().optional(),
  /** Prompt tokens the engine reused from its cache (evaluated for an earlier prompt with the same start). */
  tokens_cached: z.number().int().nonnegative().optional(),
  tokens_per_s: z.number().nonnegative().optional(),
  worker: z.string().optional(),
  driver: z.string().optional(),
  attempt: z.number().int().positive().optional(),
});
export type Receipt = z.infer<typeof Receipt>;

/**
 * A task spec as replicated: the hub's TaskSpec. Only what scheduling reads is typed here; the rest
 * rides along (a hub validates the whole spec as a TaskSpec when a handback submits it).
 */
export const WireSpec = z.object({
  id,
  prompt: z.string().optional(),
  priority: z.number().int().optional(),
  role: shortText.optional(),
  caps: z.array(shortText).max(MAX_CAPS).optional(),
  max_attempts: z.number().int().min(1).max(MAX_ATTEMPTS).optional(),
  timeout_ms: z.number().int().positive().optional(),
}).passthrough();
export type WireSpec = z.infer<typeof WireSpec>;

/**
 * A lease from a coordinator (the hub's is epoch 0). `attempt` numbers a task's leases; `unrun`
 * counts those handed back without running, which are not attempts.
 */
export const WireLease = z.object({
  worker: id,
  attempt: z.number().int().nonnegative(),
  epoch: z.number().int().nonnegative(),
  until: z.number(),
  revoked: z.boolean().optional(),
  unrun: z.number().int().nonnegative().optional(),
});
export type WireLease = z.infer<typeof WireLease>;

/** A finished attempt: a result (`text`, absent when too large to replicate) or a final error. */
export const WireOutcome = z.object({
  worker: id,
  attempt: z.number().int().nonnegative(),
  text: z.string().optional(),
  receipt: Receipt.optional(),
  error: z.object({ code: z.string().max(64), msg: z.string().max(64 * 1024) }).optional(),
  /** A result's MAC by its producer or by a hub (protocol/result-mac.ts): what a hub checks in a handback. */
  mac: z.string().max(256).optional(),
});
export type WireOutcome = z.infer<typeof WireOutcome>;

/**
 * One task's replicated state, also the delta unit: a field left out is unknown to the sender, and
 * the merge (worker/gossip/replica.ts) is a join per field. STATE and HANDBACK carry these.
 */
export const ReplicaEntry = z.object({
  id,
  spec: WireSpec.optional(),
  /** The spec's MAC by the hub or the worker that created it (protocol/result-mac.ts). */
  spec_mac: z.string().max(256).optional(),
  /** Submission order, so every coordinator dispatches in the same order. */
  seq: z.number().int().nonnegative().optional(),
  lease: WireLease.optional(),
  result: WireOutcome.optional(),
  /** A final failure (attempts exhausted); a result, if one ever arrives, wins over it. */
  failure: WireOutcome.optional(),
});
export type ReplicaEntry = z.infer<typeof ReplicaEntry>;

export const Payloads = {
  [Type.HANDSHAKE]: z.object({
    driver: shortText,
    caps: z.array(shortText).max(MAX_CAPS).default([]),
    token: z.string().max(MAX_TOKEN).optional(),
    worker_id: id.optional(),
    role: shortText.optional(),
    slots: z.number().int().min(1).max(MAX_SLOTS).default(1),
    /**
     * TASK_REQs the worker will hold queued beyond its slots, run in arrival order. The hub leases
     * that many more only while the worker's tasks are short (the round trip then costs more than the
     * task); a queued task not started soon is given back with SWARM_ERR_SLOTS_FULL.
     */
    queue: z.number().int().min(0).max(MAX_QUEUE).default(0),
    codecs: z.array(z.string().max(32)).max(8).default([Codec.NDJSON]),
    pid: z.number().int().optional(),
    /** The worker's host (worker/host-id.ts): replica holders are spread over hosts, not pids. */
    host_id: shortText.optional(),
    version: shortText.optional(),
    peer_addr: shortText.optional(),
    /**
     * A replica holder reconnecting: how far its copy of the hub's state goes (STATE `sync`), so a cut
     * sync resumes; `have`: a digest of the finished tasks it holds (protocol/replica-have.ts), so a
     * restarted hub sends what differs, not the whole state.
     */
    sync: z.object({
      gen: z.string().max(64), ver: z.number().int().nonnegative(), seq: z.number().int().optional(), end: z.number().int().optional(),
      have: z.object({ n: z.number().int().min(1).max(4096), h: z.array(z.number().int().nonnegative().max(0xffffffff)).max(4096) }).optional(),
      /** With `seq` (a cut sync): the ids where the part the holder has of it ends (worker/gossip/replica.ts `anchors`). */
      last: id.optional(), next: id.optional(),
      /** The holder answers SYNC_IDS: a hub compares the buckets that differ id by id instead of sending them whole. */
      ids: z.boolean().optional(),
      /** The holder also answers SYNC_IDS with `k` (sub-bucket values): a hub names only the ids of the sub-buckets that differ. */
      sub: z.boolean().optional(),
    }).optional(),
    /** The `session` of this worker's previous HANDSHAKE_ACK: proves a reconnect is the same worker. */
    session: z.string().max(128).optional(),
    /** Its engine as HEARTBEAT `engine` reports it; absent: a worker that does not say (counted ready once joined). */
    engine: z.enum(['starting', 'ready', 'failed']).optional(),
    /** A worker asked to take part in failover that could not (no `peer_addr` then): why, for status output. */
    failover_error: z.object({ code: z.enum(Object.keys(ErrorCode) as [keyof typeof ErrorCode, ...(keyof typeof ErrorCode)[]]), msg: z.string().max(4096) }).optional(),
  }),
  [Type.HANDSHAKE_ACK]: z.object({
    status: z.literal('ok'),
    config: z.object({
      heartbeat_ms: z.number().int().positive(),
      dead_after_ms: z.number().int().positive(),
      /** The hub leases a busy worker its next task this long before its running one ends (absent: it does not). */
      lease_ahead_ms: z.number().int().positive().optional(),
    }).passthrough(),
    worker_id: id,
    codec: z.enum([Codec.NDJSON, Codec.MSGPACK]).default(Codec.NDJSON),
    /** A secret for this connection; sent back in a reconnect's HANDSHAKE, it replaces this connection at once. */
    session: z.string().max(128).optional(),
  }),
  [Type.ASSIGN_ROLE]: z.object({
    role: shortText,
    spec_ref: z.string().max(4096).optional(),
  }),
  [Type.TASK_REQ]: z.object({
    task_id: id,
    prompt: z.string(),
    stop: z.array(z.string().max(256)).max(16).default([]),
    attempt: z.number().int().positive().default(1),
    role: shortText.optional(),
    max_tokens: z.number().int().positive().optional(),
    temperature: z.number().min(0).max(10).optional(),
    seed: z.number().int().optional(),
    grammar: z.string().optional(),
    json_schema: z.record(z.string(), z.unknown()).optional(),
    timeout_ms: z.number().int().positive().optional(),
    /**
     * false: nobody watches the answer as it is written, so the worker sends no `done:false` partials,
     * only the final TASK_RES with the whole text. Absent or true: partials, a few per second.
     */
    stream: z.boolean().optional(),
  }),
  [Type.TASK_RES]: z.object({
    /** Optional as in the spec (section 4), whose TASK_RES is `{text, done}`: then the envelope `re` names the TASK_REQ. */
    task_id: id.optional(),
    text: z.string().default(''),
    done: z.boolean(),
    seq: z.number().int().nonnegative().optional(),
    receipt: Receipt.optional(),
  }),
  [Type.HEARTBEAT]: z.object({
    load: z.number().min(0).default(0),
    status: z.string().max(32).default('idle'),
    inflight: z.number().int().nonnegative().optional(),
    state: z.string().max(32).optional(),
    /** Failover: the worker's mode (star, gossip, reconciling), who coordinates, and the fencing epoch; the hub's mode too. */
    mode: z.string().max(32).optional(),
    /** Hub to a failover worker: it holds the replicated state now. */
    holder: z.boolean().optional(),
    /** Hub to a failover worker: it keeps the open tasks only (its process holds no replica; hub/replicate-keepers.ts). */
    keeper: z.boolean().optional(),
    coordinator: z.string().max(128).optional(),
    epoch: z.number().int().nonnegative().optional(),
    /** The worker's engine: loading, ready to run tasks, or failed to start (`engine_error` says why). */
    engine: z.enum(['starting', 'ready', 'failed']).optional(),
    engine_error: z.string().max(4096).optional(),
    /** Worker to hub (cap `ends-soon`): a running task ends within the hub's `lease_ahead_ms`, by its engine's estimate. */
    ending: z.boolean().optional(),
    /** The worker's engine runs other than its first choice (a CPU variant hidden after a SIGILL): what, and why. */
    engine_fallback: z.string().max(1024).optional(),
  }),
  [Type.KILL]: z.object({ reason: z.string().max(1024).default('') }),
  [Type.ERROR]: z.object({
    code: z.enum(Object.keys(ErrorCode) as [keyof typeof ErrorCode, ...(keyof typeof ErrorCode)[]]),
    msg: z.string().max(64 * 1024),
    status: z.number().int().optional(),
    task_id: id.optional(),
    fatal: z.boolean().optional(),
    /** A task error no retry cures on any worker (an engine whose model does not load): the task fails at once. */
    permanent: z.boolean().optional(),
  }),
  [Type.ACK]: z.object({ ok: z.boolean().default(true) }).passthrough(),
  [Type.PEERS]: z.object({
    /** true: the whole list (replaces nothing, adds all); false: peers that joined since. */
    full: z.boolean().default(false),
    /** caps and role: what the worker may run, so an acting coordinator routes as the hub does. */
    peers: z.array(z.object({ id, peer_addr: shortText, caps: z.array(shortText).max(MAX_CAPS).optional(), role: shortText.optional(), slots: z.number().int().min(1).max(1024).optional() })).max(100_000),
    /** The swarm's task rules (the hub's settings), so an acting coordinator leases and retries as the hub does. */
    rules: z.object({ max_attempts: z.number().int().positive().optional(), lease_ms: z.number().int().positive().optional() }).optional(),
  }),
  [Type.STATE]: z.object({
    full: z.boolean().default(false),
    part: z.number().int().nonnegative().optional(),
    parts: z.number().int().positive().optional(),
    /** Replica entries (worker/gossip/replica.ts `Entry`): merged by task id, order-independent. */
    entries: z.array(ReplicaEntry).max(100_000),
    /** Topology runs: a run's spec while it runs, `ended` once it is over (worker/gossip/runs.ts). */
    runs: z.array(z.object({ run: id, spec: z.unknown().optional(), ended: z.boolean().optional() })).max(1000).optional(),
    /** Finished tasks that left the hub's hot state (its retention horizon): a holder drops them too. */
    evicted: z.array(id).max(100_000).optional(),
    /** To a keeper of the open tasks: these tasks finished; it drops them (unless it ran them itself). */
    closed: z.array(id).max(100_000).optional(),
    /** To a keeper of the open tasks: drop every open task held (a sync of the open tasks follows). */
    reset_open: z.boolean().optional(),
    /**
     * How far the receiver's copy now goes, for a resume after a cut (hub/replicate-resume.ts): every
     * change up to version `ver` of hub generation `gen`, for the tasks up to `seq` (submission order)
     * of the whole-state sync under way; no `seq`: for every task (the sync is complete). `end`: where
     * that sync ends (the tasks from there on reached the receiver as deltas, up to `ver`). A frame
     * without it changes nothing of what the receiver reports.
     */
    sync: z.object({ gen: z.string().max(64), ver: z.number().int().nonnegative(), seq: z.number().int().optional(), end: z.number().int().optional() }).optional(),
  }),
  [Type.HANDBACK]: z.object({
    /** Final replica entries to merge (empty in an offer). */
    entries: z.array(ReplicaEntry).max(100_000),
    /**
     * Ids-first handback: task ids the worker would hand back. The hub merges nothing and answers ACK
     * with `want`, the offered ids it does not have final; the worker then sends only those as `entries`.
     */
    offer: z.array(id).max(100_000).optional(),
    /**
     * Digest-first handback, before any `offer`: the worker's final entries it would hand back, as
     * values of an `n`-bucket digest (protocol/replica-have.ts `haveOf`: id and outcome), for
     * `buckets` (all `n` if absent) index by index; `skip`: outcome workers whose tasks it leaves out.
     * The hub folds its own final tasks the same way and answers ACK with `differ`, the buckets whose
     * value is not its own; the worker offers ids only from those (or splits them: `n` times k, the
     * sub-buckets of a differing bucket b being b + j*n). A hub that predates it answers without `differ`.
     */
    digest: z.object({
      n: z.number().int().min(1).max(HAVE_MAX_SUB_BUCKETS),
      buckets: z.array(z.number().int().nonnegative().max(HAVE_MAX_SUB_BUCKETS - 1)).max(100_000).optional(),
      h: z.array(z.number().int().nonnegative().max(0xffffffff)).max(100_000),
      skip: z.array(id).max(10_000).default([]),
    }).optional(),
  }),
  [Type.SYNC_IDS]: z.object({
    /**
     * The digest's bucket count and the buckets this frame covers, each whole: HANDSHAKE `sync.have.n`,
     * or that times a `k` of an earlier frame (the sub-buckets that differed).
     */
    n: z.number().int().min(1).max(HAVE_MAX_SUB_BUCKETS),
    buckets: z.array(z.number().int().nonnegative().max(HAVE_MAX_SUB_BUCKETS - 1)).max(100_000),
    /** The hub's finished tasks in those buckets, and each one's fingerprint (protocol/replica-have.ts `haveOf`), index by index. */
    ids: z.array(id).max(100_000),
    h: z.array(z.number().int().nonnegative().max(0xffffffff)).max(100_000),
    /**
     * Sub-bucket values instead of ids (to a holder whose HANDSHAKE said `sub`): each bucket split in
     * `k`, sub-bucket j of bucket b being bucket b + j*n of a digest of n*k buckets; `sums` has k
     * values per bucket of `buckets`, in order, each the XOR of the fingerprints in its sub-bucket.
     */
    k: z.number().int().min(2).max(256).optional(),
    sums: z.array(z.number().int().nonnegative().max(0xffffffff)).max(100_000).optional(),
  }),
  [Type.SYNC_WANT]: z.object({
    /** Of the ids named (`re` = the SYNC_IDS), those the holder lacks or holds with another fingerprint. */
    want: z.array(id).max(100_000),
    /** Finished tasks the holder holds in those buckets that the SYNC_IDS did not name. */
    extra: z.array(id).max(100_000).default([]),
    /** To a frame with `k`: the sub-buckets (as buckets of n*k) whose value differs from the holder's. */
    differ: z.array(z.number().int().nonnegative().max(HAVE_MAX_SUB_BUCKETS - 1)).max(100_000).optional(),
  }),
} as const;

export type Payload<T extends Type> = z.infer<(typeof Payloads)[T]>;

/** The envelope of every message, as in the spec, plus `re` naming the message a reply answers. */
export const Envelope = z.object({
  ver: z.literal(PROTOCOL_VERSION),
  id,
  type: z.string(),
  src: z.string().max(128).default(''),
  dst: z.string().max(128).default(''),
  re: id.optional(),
  payload: z.unknown(),
});

/** A fully validated message of type T. */
export interface Message<T extends Type = Type> {
  ver: typeof PROTOCOL_VERSION;
  id: string;
  type: T;
  src: string;
  dst: string;
  re?: string;
  payload: Payload<T>;
}

/** Any validated message, discriminated on `type`. */
export type AnyMessage = { [K in Type]: Message<K> }[Type];
