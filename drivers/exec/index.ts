/** The exec driver: one command per task, stdout is the answer. */
export { ExecDriver, execFactory, parseExecOptions, type ExecOptions } from './driver.js';
