/** The echo driver: deterministic answers for tests and benchmarks. */
export { EchoDriver, echoFactory, parseEchoOptions, type EchoOptions } from './driver.js';
