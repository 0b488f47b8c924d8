/**
 * The entry of the hub's bundle (cli/bundle.ts; cli/main.ts runs it for `swarm hub`): the command
 * line with the hub command and what it loads before it listens, imported here so that the bundle
 * holds them in one piece instead of chunks loaded one after another.
 */
import { runCli } from './program.js';
import { registerHub } from './commands/hub.js';
import './run-hub.js';
import './log.js';
import '../hub/store-heap.js';

// Linked and running: an error from here on is the hub's (cli/main.ts falls back to the modules only before).
(globalThis as Record<symbol, unknown>)[Symbol.for('swarm.hub-bundle.ran')] = true;
await runCli({ hub: registerHub });
