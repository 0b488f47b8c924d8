import { SwarmError } from '../protocol/index.js';
import type { Driver, DriverConfig } from './types.js';
import { echoFactory } from './echo/index.js';
import { execFactory } from './exec/index.js';
import { llamaServerFactory } from './llama-server/index.js';
import { llamaCliFactory } from './llama-cli/index.js';
import { embeddedFactory } from './embedded/index.js';
import { ollamaFactory } from './ollama/index.js';

/** Makes a driver from its settings; validates them (SWARM_ERR_CONFIG on a bad option). */
export type DriverFactory = (config: DriverConfig) => Driver;

const factories = new Map<string, DriverFactory>([
  ['echo', echoFactory],
  ['exec', execFactory],
  ['llama-server', llamaServerFactory],
  ['llama-cli', llamaCliFactory],
  ['embedded', embeddedFactory],
  ['ollama', ollamaFactory],
]);

/** Names of the drivers this build knows. */
export function driverNames(): string[] { return [...factories.keys()]; }

/** Add a driver (used by drivers that register themselves, and by tests). */
export function registerDriver(name: string, f: DriverFactory): void { factories.set(name, f); }

/** Create the driver named in `config`. */
export function createDriver(config: DriverConfig): Driver {
  const f = factories.get(config.name);
  if (!f) throw new SwarmError('SWARM_ERR_CONFIG', `unknown driver "${config.name}" (known: ${driverNames().join(', ')})`);
  return f(config);
}
