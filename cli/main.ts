#!/usr/bin/env node
import { Command } from 'commander';
import { VERSION } from './state.js';
import { registerUp } from './commands/up.js';
import { registerHub } from './commands/hub.js';
import { registerWorker } from './commands/worker.js';
import { registerStatus } from './commands/status.js';
import { registerSubmit } from './commands/submit.js';
import { registerDown } from './commands/down.js';
import { registerEngine } from './commands/engine.js';
import { registerRun } from './commands/run.js';
import { registerRuns } from './commands/runs.js';
import { registerPlan } from './commands/plan.js';
import { registerDeploy } from './commands/deploy.js';

const program = new Command()
  .name('swarm')
  .description('Run many local LLM agents as processes and organise them into multi-agent topologies.')
  .version(VERSION)
  .showHelpAfterError()
  .addHelpText('after', `
Exit codes: 0 ok, 1 error, 2 usage, 3 no running swarm, 4 tasks failed, 5 timeout, 6 already running.
State lives in ./.swarm (--state-dir or SWARM_STATE_DIR). Docs: README.md, protocol/PROTOCOL.md.`);

// Before the commands are added: subcommands inherit it. Usage errors exit 2 (commander says 1).
program.exitOverride((err) => process.exit(err.exitCode === 1 ? 2 : err.exitCode));

registerUp(program);
registerHub(program);
registerWorker(program);
registerStatus(program);
registerSubmit(program);
registerDown(program);
registerEngine(program);
registerRun(program);
registerRuns(program);
registerPlan(program);
registerDeploy(program);

await program.parseAsync(process.argv);
