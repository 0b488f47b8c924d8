/** Experiments over datasets: conditions (topology and baselines), scoring, statistics. */
export { loadDataset, parseDataset, rng, type DatasetItem } from './dataset.js';
export { makeArithmetic, type ArithmeticItem } from './arithmetic.js';
export { makeMultipleChoice, makeWordProblems, type GeneratedItem } from './generators.js';
export { conditionsOf, experimentTopology, type Budget, type UnitDone } from './conditions.js';
export { finishExperiment, type ExperimentResult, type ConditionStats, type ItemRow } from './finalize.js';
export { summarise, paired, mcnemar, bootstrapCi, binomTwoSided, chi2Df1Upper, mean, stderr, quantile, formatMcNemar, type Summary, type Paired, type McNemar } from './stats.js';
export { budgetLines, ciNote, holmNote } from './notes.js';
export { clopperPearson, holm, clampP } from './stats.js';
