/**
 * The one catalogue of error codes. Used in ERROR frames, CLI exit messages and logs.
 * Match on `code`, never on message text.
 */
export const ErrorCode = {
  SWARM_ERR_LINE_TOO_LONG: { status: 413, fatal: false, doc: 'A frame exceeded the maximum line length; it was discarded.' },
  SWARM_ERR_BAD_JSON: { status: 400, fatal: false, doc: 'A line was not valid JSON (or not valid UTF-8).' },
  SWARM_ERR_BAD_FRAME: { status: 400, fatal: false, doc: 'A msgpack frame could not be decoded.' },
  SWARM_ERR_BAD_VERSION: { status: 400, fatal: false, doc: 'The envelope `ver` is not a version this peer speaks.' },
  SWARM_ERR_UNKNOWN_TYPE: { status: 400, fatal: false, doc: 'The envelope `type` is not a known message type.' },
  SWARM_ERR_BAD_ENVELOPE: { status: 400, fatal: false, doc: 'The envelope is missing fields or has fields of the wrong type.' },
  SWARM_ERR_BAD_PAYLOAD: { status: 400, fatal: false, doc: 'The payload failed the schema of its message type.' },
  SWARM_ERR_TOO_MANY_ERRORS: { status: 400, fatal: true, doc: 'The peer sent too many bad frames and was disconnected.' },
  SWARM_ERR_AUTH: { status: 401, fatal: true, doc: 'HANDSHAKE carried a wrong or missing token.' },
  SWARM_ERR_HANDSHAKE_TIMEOUT: { status: 408, fatal: true, doc: 'No HANDSHAKE arrived within the handshake timeout.' },
  SWARM_ERR_NOT_READY: { status: 409, fatal: false, doc: 'A message other than HANDSHAKE arrived before the handshake completed.' },
  SWARM_ERR_UNEXPECTED: { status: 409, fatal: false, doc: 'A message arrived that this peer does not accept in its current state.' },
  SWARM_ERR_DUPLICATE_WORKER: { status: 409, fatal: true, doc: 'A worker with this id is already connected.' },
  SWARM_ERR_BACKPRESSURE: { status: 503, fatal: true, doc: 'The outbound buffer to a peer passed its bound; the peer is too slow and was disconnected.' },
  SWARM_ERR_QUEUE_FULL: { status: 429, fatal: false, doc: 'The task queue is at its maximum depth, or the finished tasks held hot are past their bytes bound and its margin while the archive catches up; the task was not accepted (retry later).' },
  SWARM_ERR_SLOTS_FULL: { status: 429, fatal: false, doc: 'A worker received more tasks than its slots.' },
  SWARM_ERR_UNKNOWN_TASK: { status: 404, fatal: false, doc: 'A TASK_RES or lookup named a task the hub does not know or no longer leases to this worker.' },
  SWARM_ERR_TASK_FAILED: { status: 500, fatal: false, doc: 'The driver failed while running a task.' },
  SWARM_ERR_TASK_TIMEOUT: { status: 504, fatal: false, doc: 'A task ran past its timeout.' },
  SWARM_ERR_LOOP_DETECTED: { status: 508, fatal: false, doc: 'The same output line repeated more than the loop guard allows; the engine was stopped.' },
  SWARM_ERR_ENGINE_DIED: { status: 500, fatal: false, doc: 'The engine subprocess exited while running a task.' },
  SWARM_ERR_ENGINE_START: { status: 500, fatal: false, doc: 'The engine subprocess could not be started.' },
  SWARM_ERR_RETRIES_EXHAUSTED: { status: 500, fatal: false, doc: 'A task failed on every attempt it was allowed.' },
  SWARM_ERR_NO_SWARM: { status: 404, fatal: false, doc: 'No running swarm was found in the state directory.' },
  SWARM_ERR_ALREADY_RUNNING: { status: 409, fatal: false, doc: 'A swarm is already running in this state directory.' },
  SWARM_ERR_CONFIG: { status: 400, fatal: false, doc: 'A setting or option was invalid.' },
  SWARM_ERR_INSECURE_BIND: { status: 400, fatal: false, doc: 'Refused to bind a non-loopback address without an auth token.' },
  SWARM_ERR_JOURNAL: { status: 500, fatal: false, doc: 'The journal could not be read or written.' },
  SWARM_ERR_TIMEOUT: { status: 504, fatal: false, doc: 'An operation did not complete in time.' },
  SWARM_ERR_SHUTDOWN: { status: 503, fatal: false, doc: 'The hub or worker is shutting down.' },
  SWARM_ERR_ENGINE_NOT_FOUND: { status: 500, fatal: false, doc: 'A llama.cpp program (llama-server, llama-cli) was not found; run `swarm engine build`.' },
  SWARM_ERR_ENGINE_BUILD: { status: 500, fatal: false, doc: 'Building the llama.cpp programs failed (a build tool is missing or the compile failed).' },
  SWARM_ERR_UNKNOWN_RUN: { status: 404, fatal: false, doc: 'No run with this id on the hub (or in the state directory).' },
  SWARM_ERR_STREAM_GAP: { status: 502, fatal: false, doc: 'A streamed answer ended (done:true) with pieces missing by `seq`; that attempt failed and the task is retried.' },
  SWARM_ERR_CANCELLED: { status: 409, fatal: false, doc: 'The task was cancelled (its run was cancelled); hub to worker: stop running it.' },
  SWARM_ERR_INTERNAL: { status: 500, fatal: false, doc: 'An unexpected internal error; please report it.' },
  SWARM_ERR_TOO_LARGE: { status: 400, fatal: false, doc: 'A task cannot be sent to a worker: its fields do not fit in one protocol line, or its json_schema is nested too deep or too big; or a POST /tasks carries more tasks than one request may; the message names the limit.' },
  SWARM_ERR_DISK_FULL: { status: 507, fatal: false, doc: 'The disk of the state directory is full: the journal could not record the request, so nothing of it was kept; retry when space frees.' },
  SWARM_ERR_TOO_MANY_WAITS: { status: 429, fatal: false, doc: 'The hub is already holding its maximum of concurrent /wait requests; retry later.' },
  SWARM_ERR_CONTEXT_EXCEEDED: { status: 413, fatal: false, doc: "A task's prompt does not fit in its engine's context (per sequence); the task fails without a retry." },
  SWARM_ERR_HANDBACK_REFUSED: { status: 403, fatal: false, doc: "HANDBACK entries the hub did not record: a result without a valid MAC of the worker it names, one for a task leased to another live worker, or a task the hub does not know whose spec carries no valid MAC; the message names them, the other entries of the frame were merged." },
  SWARM_ERR_PEER_PORT: { status: 500, fatal: false, doc: "A worker could not open its failover peer port (the port asked for is taken, or no local port is left); that agent runs without failover, its tasks through the hub only." },
  SWARM_ERR_RESULT_PRUNED: { status: 410, fatal: false, doc: "A finished task's archived record was removed by the results archive's bound (`--archive-max`), or is missing or damaged (its file cut or written over outside the hub), while its id is still in the duplicate window: the task is shown failed with this code, and a resubmit of the id is a duplicate, not run again." },
  SWARM_ERR_STATE_ACCESS: { status: 403, fatal: false, doc: 'CLI: the state directory or a file in it could not be read (another user\'s directory, permissions), or a running hub\'s hub.json is missing or damaged; nothing was changed.' },
} as const;
export type ErrorCode = keyof typeof ErrorCode;

/** An error that carries a catalogue code. */
export class SwarmError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SwarmError';
    this.code = code;
    this.status = ErrorCode[code].status;
  }
}

/** True if `x` is a known catalogue code. */
export function isErrorCode(x: unknown): x is ErrorCode {
  return typeof x === 'string' && Object.prototype.hasOwnProperty.call(ErrorCode, x);
}

/** The catalogue code an error carries (a SwarmError's, or a `code` field that is one), else `fallback`. */
export function errorCodeOf(err: unknown, fallback: ErrorCode = 'SWARM_ERR_TASK_FAILED'): ErrorCode {
  if (err instanceof SwarmError) return err.code;
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return isErrorCode(code) ? code : fallback;
}
