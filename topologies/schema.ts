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
  /**
   * A JSONL file of items (`id`, the fields prompts use, `expected`), relative to the experiment file:
   * the topology runs once per item (and per baseline), and each item's answer is scored.
   */
  dataset: z.string().min(1).optional(),
  /** Use the first N items (after shuffling, when shuffle_seed is given). */
  limit: z.number().int().min(1).max(1_000_000).optional(),
  /** Shuffle the items with this seed before `limit` takes the first N. */
  shuffle_seed: z.number().int().min(0).max(2 ** 31 - 1).optional(),
  /** Dataset items (per condition) running at once, at most. */
  concurrency: z.number().int().min(1).max(100_000).default(8),
}).strict();

const NormaliseFields = {
  /** Compare case-sensitively (default: case-folded). */
  case_sensitive: z.boolean().default(false),
  /** Drop punctuation before comparing. */
  strip_punctuation: z.boolean().default(false),
  /** Which part of the answer is compared: all of it, its last non-empty line, or its last number. */
  extract: z.enum(['whole', 'last_line', 'last_number']).default('whole'),
  /** Take the answer from after the last occurrence of this marker (e.g. "Answer:") when it occurs. */
  after: z.string().min(1).max(256).optional(),
};

/** Scorers that read no part of the answer themselves (judge, exec) say what a vote compares. */
const VoteFields = { ...NormaliseFields, extract: z.enum(['whole', 'last_line', 'last_number']).default('last_line') };

/** How an item's answer is scored: a number in [0, 1]. */
export const ScorerSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('exact'), ...NormaliseFields }).strict(),
  z.object({
    type: z.literal('contains'), ...NormaliseFields,
  }).strict(),
  z.object({
    type: z.literal('regex'),
    /** Matched against the answer; `{{expected}}` inside it stands for the item's expected answer, regex-escaped. */
    pattern: z.string().min(1).max(4096).refine((p) => { try { new RegExp(p.replaceAll('{{expected}}', 'x')); return true; } catch { return false; } }, 'not a valid regular expression'),
    flags: z.string().regex(/^[imsu]*$/, 'flags: any of i, m, s, u').default('i'),
    /**
     * What votes compare and reports show: the last match of this pattern in the answer (its first
     * group, else the whole match). Default: `pattern` with `{{expected}}` read as one word or number.
     */
    answer: z.string().min(1).max(4096).refine((p) => { try { new RegExp(p); return true; } catch { return false; } }, 'not a valid regular expression').optional(),
  }).strict(),
  z.object({
    type: z.literal('numeric'),
    /** Absolute tolerance. */
    tolerance: z.number().min(0).default(1e-9),
    /** Relative tolerance (of the expected value). */
    relative: z.number().min(0).default(0),
  }).strict(),
  z.object({
    type: z.literal('json_field'),
    /** Dotted path into the first JSON object of the answer (`answer`, `result.value`, `items.0`). */
    path: z.string().min(1).max(512),
    /** The value wanted; default the item's `expected`. */
    expected: z.unknown().optional(),
  }).strict(),
  z.object({
    /** The `grader` role grades each answer against the reference (prompt and schema: roles.grader). */
    type: z.literal('judge'),
    /** What votes compare (the grader always sees the whole answer): default its last non-empty line. */
    ...VoteFields,
  }).strict(),
  z.object({
    type: z.literal('exec'),
    /** argv; run in the experiment's folder; reads {"answer", "item"} as JSON on stdin, prints a score in [0, 1]. */
    command: z.array(z.string().min(1)).min(1).max(64),
    timeout_ms: z.number().int().positive().max(600_000).default(10_000),
    /** What votes compare (the command always gets the whole answer): default its last non-empty line. */
    ...VoteFields,
  }).strict(),
]);
export type Scorer = z.output<typeof ScorerSchema>;

/** Baselines answered on the same items as the topology. */
export const BASELINES = ['single', 'majority_vote', 'self_consistency'] as const;
export type BaselineName = (typeof BASELINES)[number];

export const BaselineSchema = z.object({
  /** Agents per vote; default: matched to the topology's measured tokens per item. */
  k: z.number().int().min(1).max(256).optional(),
  /** Upper bound on the matched k. */
  k_max: z.number().int().min(1).max(256).default(16),
  /** Items whose measured cost sets k (the first N of the topology and the single agent). */
  calibration_items: z.number().int().min(1).max(10_000).default(10),
  /** Sampling temperature of self-consistency (majority_vote uses the role's, like the topology). */
  temperature: z.number().min(0).max(10).default(0.7),
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
  /** Scoring of dataset items (default `exact` when inputs.dataset is given). */
  scorer: ScorerSchema.optional(),
  baselines: z.array(z.enum(BASELINES)).max(3).default([]),
  baseline: BaselineSchema.default(BaselineSchema.parse({})),
}).strict();
export type Experiment = z.output<typeof ExperimentSchema>;
export type ExperimentInput = z.input<typeof ExperimentSchema>;
