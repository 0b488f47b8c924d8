/** The simulated driver: right with a set probability, for testing experiment statistics (not a model). */
export { SimulatedDriver, simulatedFactory, parseSimulatedOptions, findExpression, type SimulatedOptions } from './driver.js';
