/**
 * The unit tier (`npm run test:unit`): pure and in-process files, no child processes, no engines.
 * A file belongs here when it starts nothing (no swarm CLI, no spawned process) and ends in seconds.
 */
export const UNIT: ReadonlySet<string> = new Set([
  'test/protocol/codec.test.ts',
]);
