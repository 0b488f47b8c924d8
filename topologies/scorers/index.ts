/** Scorers: an answer and an item's reference to a score in [0, 1]. */
export { scorePure, voteKey, gradeOf, type ScoreResult } from './pure.js';
export { scoreExec } from './exec.js';
export { normalise, extract, lastNumber, type NormaliseOptions } from './normalise.js';
