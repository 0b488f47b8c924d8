export { parseExperiment, loadExperiment, ExperimentError, ExperimentSchema, TOPOLOGIES, type Experiment, type ExperimentInput, type ExperimentIssue, type Role, type TopologyName } from './experiment.js';
export { resolveInputs, chunk } from './inputs.js';
export { topology } from './registry.js';
export { Runner, taskId, type Executor, type TaskRequest, type SubmitOutcome, type RunSink, type Progress, type RunOutcome, type RunnerOptions } from './runner.js';
export { cohenKappa, fleissKappa, agreement } from './kappa.js';
export { parseJsonObject } from './structured.js';
export { render } from './template.js';
export { nodeSeed } from './seed.js';
export type { NodeTask, NodeResult, Results, RunDone, Step, RunSpec, ResolvedInputs, Topology } from './types.js';
