import type { Experiment } from './experiment.js';
import type { DatasetItem } from './experiment/dataset.js';

/** A node's work, as a topology asks for it. Node ids are deterministic (`map/17`, `debate/r2/fast`). */
export interface NodeTask {
  node: string;
  /** The experiment role that runs it (its prompt template, driver/model, schema). */
  role: string;
  /** The fully rendered prompt. */
  prompt: string;
  /** The variables the prompt was rendered from (recorded as the node's input artifact). */
  input: Record<string, unknown>;
  json_schema?: Record<string, unknown>;
  /** Overrides the role's temperature (self-consistency samples). */
  temperature?: number;
  /** The nodes whose outputs this one reads (the graph's edges, for reports). */
  after?: string[];
}

/** The outcome of a node: text when it ran, an error when it failed on every attempt. */
export interface NodeResult {
  ok: boolean;
  text: string;
  error?: { code: string; msg: string };
  /** The worker's receipt (timings, tokens). */
  receipt?: { duration_ms?: number; ttft_ms?: number; tokens_in?: number; tokens_out?: number; tokens_cached?: number; tokens_per_s?: number; worker?: string; driver?: string; started_at?: number; finished_at?: number };
  worker?: string;
}

/** Results so far, keyed by node id. */
export type Results = ReadonlyMap<string, NodeResult>;

/** How a run ended. `verdict` is topology-specific (approved, rejected, stopped, aborted, pass, …). */
export interface RunDone {
  output: string;
  verdict?: string;
  reason?: string;
  /** Topology-specific facts worth reporting (winner, scores, kappa, rounds, …). */
  details?: Record<string, unknown>;
}

/** One step of a topology: the nodes ready to run now (those without a result), or the end. */
export interface Step {
  tasks: NodeTask[];
  done?: RunDone;
}

/** Inputs read once before the run starts, so `next` stays a pure function of data. */
export interface ResolvedInputs {
  /** The whole input as one text (text, or a file, or a folder's files joined). */
  text: string;
  /** Items for fan-out topologies: inputs.items, else one per file of a folder, else lines of a file. */
  items: string[];
  /** Chunks for map-reduce, with where each came from. */
  chunks: { source: string; index: number; text: string }[];
  /** Dataset items (inputs.dataset): the topology runs once per item, and per baseline. */
  dataset?: DatasetItem[];
  /** The experiment file's folder (an exec scorer runs there). */
  base_dir?: string;
}

/** An experiment plus its resolved inputs: everything a topology needs. Serialisable (spec.json). */
export interface RunSpec {
  experiment: Experiment;
  inputs: ResolvedInputs;
}

/** A role's defaults: its prompt template and, for structured roles, its output schema. */
export interface RoleDefault { prompt: string; json_schema?: Record<string, unknown> }

/** A problem found in an experiment, by path (located to a line by the parser). */
export interface SpecIssue { path: PropertyKey[]; message: string }

/** A topology: a pure function from (spec, results so far) to the next step. */
export interface Topology {
  readonly name: string;
  /** The roles this experiment's graph uses. */
  roles(e: Experiment): string[];
  /** Defaults for the roles it knows by name. */
  readonly defaults: Record<string, RoleDefault>;
  /** Topology-specific checks beyond the schema. */
  check?(e: Experiment): SpecIssue[];
  /**
   * The nodes ready now that have no result yet, or the end of the run. Pure. `skip` names nodes
   * already submitted (a hint: they need not be built again); a step with no tasks and no `done`
   * means "waiting for results".
   */
  next(spec: RunSpec, results: Results, skip?: { has(node: string): boolean }): Step;
}
