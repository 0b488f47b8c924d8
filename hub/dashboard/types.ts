/** What the dashboard's event stream carries (the page and `swarm top` read it). */

/** One worker row. `state` is the hub's view: `idle`, `busy` (holds a task), or `dead` from its link dropping until it is back. */
export interface WorkerRow {
  id: string;
  state: string;
  /** What the worker last said of itself in a heartbeat (IDLE, BUSY, …); it lags the hub's view. */
  agent_state: string;
  role: string;
  role_pending?: string;
  driver: string;
  /** Where its connection comes from (`local` for loopback) and its pid. */
  host: string;
  pid?: number;
  /** Task ids it holds now. */
  tasks: string[];
  slots: number;
  /** Tokens out per second over the last few seconds, counting the pieces of answers still streaming. */
  tps: number;
  done: number;
  /** Epoch ms it was last heard from, rounded to a second. */
  last_seen: number;
  /** How often it came back after dropping out (respawned or reconnected). */
  respawns: number;
  /** Epoch ms its link dropped, while it is away; a supervised worker is respawned. */
  dead_since?: number;
  supervised: boolean;
}

/** One sample of the queue chart: [epoch s, queued, leased, done, failed, tokens/s]. */
export type Sample = [number, number, number, number, number, number];

export interface QueueView {
  queued: number; leased: number; done: number; failed: number;
  dispatch_p50_ms: number; dispatch_p99_ms: number;
  /** Tokens out per second over the last few chart samples. */
  tps: number;
  submitted: number;
}

export interface NodeRow {
  node: string; role: string; after: string[];
  /** queued (waiting for a worker), running, done, failed, cancelled. */
  state: string;
  worker?: string;
  verdict?: string;
  /** Its task id (prompt and output: /dashboard/task?id=…). */
  task: string;
  ms?: number;
}

export interface RunRow {
  run: string; experiment: string; topology: string;
  state: 'running' | 'done';
  verdict?: string; reason?: string;
  submitted: number; done: number; failed: number; running: number;
  tokens_out: number; tokens_per_s: number; elapsed_ms: number;
  nodes: NodeRow[];
  /** Nodes left out of `nodes` (big runs). */
  more: number;
  /** Present once its report.html exists. */
  report?: string;
}

export interface HubView {
  name: string; pid: number; mode: string; coordinator: string; started_at: number;
  address?: { host: string; port: number };
  supervised: number;
}

/** The whole state, as the first message (`snapshot`); `patch` messages replace whole sections. */
export interface DashState {
  hub: HubView;
  workers: WorkerRow[];
  queue: QueueView;
  history: Sample[];
  runs: RunRow[];
}

/** A `patch`: changed sections, and chart samples taken since the last message. */
export type DashPatch = Partial<Omit<DashState, 'history'>> & { samples?: Sample[] };
