/** Capacity planning: how many agents of a GGUF model fit on a machine (`swarm plan`). */
export { readModelShape, shapeFromGguf, type ModelShape } from './gguf.js';
export { plan, kvBytesPerToken, computeBufferBytes, PLAN_DEFAULTS, type Plan, type PlanOptions, type PlanWarning, type EngineMode } from './estimate.js';
export { formatPlan } from './report.js';
export { toMi, tensorBytes, typeName, REPACKED_ON_X86 } from './sizes.js';
export { beyondPlan, machineRam } from './fit.js';
