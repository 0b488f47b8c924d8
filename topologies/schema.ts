import { z } from 'zod';

/** Topology names an experiment may use. */
export const TOPOLOGIES = ['star', 'pipeline', 'diamond-debate', 'arena', 'map-reduce', 'strict-chain'] as const;
export type TopologyName = (typeof TOPOLOGIES)[number];

const name = z.string().min(1).max(64).regex(/^[a-z][a-z0-9_-]*$/, 'lowercase letters, digits, "-" and "_", starting with a letter');

/** One role: its prompt template, how many agents take it, which engine runs it, its output schema. */
export const RoleSchema = z.object({
  prompt: z.string().min(1).max(256 * 1024).optional(),
  agents: z.number().int().min(1).max(10_000).default(1),
  driver: z.string().min(1).max(64).optional(),
  model: z.string().min(1).max(4096).optional(),
  /** Capabilities a worker must advertise to take this role's tasks. */
  caps: z.array(z.string().min(1).max(256)).max(16).optional(),
  json_schema: z.record(z.string(), z.unknown()).optional(),
  max_tokens: z.number().int().positive().max(1_000_000).optional(),
  temperature: z.number().min(0).max(10).optional(),
}).strict();
export type Role = z.output<typeof RoleSchema>;

export const LimitsSchema = z.object({
  /** Feedback rounds (pipeline) or debate rounds. */
  rounds: z.number().int().min(1).max(1000).default(3),
  /** Debate turn cap: proposer, debater and merger turns together. */
  turns: z.number().int().min(1).max(100_000).default(50),
  /** Debate: consecutive drift rounds that abort the run. */
  drift_cap: z.number().int().min(1).max(1000).default(3),
  max_tokens: z.number().int().positive().max(1_000_000).default(256),
  /** Per task. */
  timeout_ms: z.number().int().positive().max(24 * 3600_000).default(120_000),
  max_attempts: z.number().int().min(1).max(100).default(2),
  /** Nodes of one run submitted and not yet finished, at most (the rest wait their turn). */
  max_inflight: z.number().int().min(1).max(1_000_000).default(10_000),
  /** Bound on the nodes of one run. */
  max_nodes: z.number().int().min(1).max(1_000_000).default(100_000),
  /** The whole run; 0 = no bound. */
  run_timeout_ms: z.number().int().min(0).default(0),
}).strict();

export const InputsSchema = z.object({
  text: z.string().max(64 * 1024 * 1024).optional(),
  /** Relative to the experiment file. */
  file: z.string().min(1).optional(),
  folder: z.string().min(1).optional(),
  items: z.array(z.string().max(1024 * 1024)).max(100_000).optional(),
  /** File name endings a folder is filtered by (e.g. [".md", ".txt"]). */
  extensions: z.array(z.string().min(1).max(32)).max(64).optional(),
  max_files: z.number().int().min(1).max(1_000_000).default(10_000),
  /** Map-reduce chunk size in characters (chunks break at line ends where they can). */
  chunk_chars: z.number().int().min(16).max(10_000_000).default(2000),
}).strict();

export const PipelineSchema = z.object({
  stages: z.array(name).min(1).max(64).default(['thinker', 'worker', 'typeguard', 'tester', 'reviewer']),
  /** Stage -> the stage its rejection sends the work back to. A stage listed here is a gate. */
  gates: z.record(name, name).default({ typeguard: 'worker', tester: 'worker', reviewer: 'worker' }),
}).strict();

export const DebateSchema = z.object({
  stances: z.array(name).min(1).max(64).default(['fast', 'readable']),
}).strict();

export const ArenaSchema = z.object({
  mode: z.enum(['rubric', 'pairwise']).default('rubric'),
  rubric: z.string().max(64 * 1024).default('correctness, clarity and brevity'),
  /** Rubric scores are integers in [min, max]. */
  scale: z.tuple([z.number().int(), z.number().int()]).default([1, 10]),
}).strict();

export const MapReduceSchema = z.object({
  fan_in: z.number().int().min(2).max(1024).default(4),
}).strict();

export const ChainSchema = z.object({
  stages: z.array(name).min(1).max(64).default(['scanner', 'anonymizer', 'validator', 'auditor']),
}).strict();

export const ArtifactsSchema = z.object({
  /**
   * Nodes that get their own folder (`nodes/<node>/`); every node, these included, is also a line
   * of nodes.jsonl. File creation is slow on some disks (1-2 ms each), so big runs keep to the file.
   */
  node_folders: z.number().int().min(0).max(1_000_000).default(256),
}).strict();

/** An experiment file. Strict: a misspelt field is an error naming its line. */
export const ExperimentSchema = z.object({
  name: z.string().min(1).max(128).default('experiment'),
  description: z.string().max(64 * 1024).optional(),
  topology: z.enum(TOPOLOGIES),
  seed: z.number().int().min(0).max(2 ** 31 - 1).default(0),
  temperature: z.number().min(0).max(10).default(0),
  roles: z.record(name, RoleSchema).default({}),
  limits: LimitsSchema.default(LimitsSchema.parse({})),
  inputs: InputsSchema.default(InputsSchema.parse({})),
  pipeline: PipelineSchema.default(PipelineSchema.parse({})),
  debate: DebateSchema.default(DebateSchema.parse({})),
  arena: ArenaSchema.default(ArenaSchema.parse({})),
  map_reduce: MapReduceSchema.default(MapReduceSchema.parse({})),
  chain: ChainSchema.default(ChainSchema.parse({})),
  artifacts: ArtifactsSchema.default(ArtifactsSchema.parse({})),
}).strict();
export type Experiment = z.output<typeof ExperimentSchema>;
export type ExperimentInput = z.input<typeof ExperimentSchema>;
