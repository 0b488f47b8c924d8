#!/usr/bin/env node
import { Command } from 'commander';
import { VERSION } from './state.js';

type Register = (program: Command) => void;

/**
 * Commands, loaded on demand: a worker process (25 of them on a small VPS) loads only the worker
 * command and what it needs, not the planner, the topologies or the deploy renderer.
 */
const COMMANDS: Record<string, () => Promise<Register>> = {
  up: async () => (await import('./commands/up.js')).registerUp,
  hub: async () => (await import('./commands/hub.js')).registerHub,
  worker: async () => (await import('./commands/worker.js')).registerWorker,
  status: async () => (await import('./commands/status.js')).registerStatus,
  submit: async () => (await import('./commands/submit.js')).registerSubmit,
  down: async () => (await import('./commands/down.js')).registerDown,
  engine: async () => (await import('./commands/engine.js')).registerEngine,
  run: async () => (await import('./commands/run.js')).registerRun,
  runs: async () => (await import('./commands/runs.js')).registerRuns,
  results: async () => (await import('./commands/results.js')).registerResults,
  sweep: async () => (await import('./commands/sweep.js')).registerSweep,
  dataset: async () => (await import('./commands/dataset.js')).registerDataset,
  plan: async () => (await import('./commands/plan.js')).registerPlan,
  deploy: async () => (await import('./commands/deploy.js')).registerDeploy,
  dashboard: async () => (await import('./commands/dashboard.js')).registerDashboard,
  top: async () => (await import('./commands/top.js')).registerTop,
  certs: async () => (await import('./commands/certs.js')).registerCerts,
  credential: async () => (await import('./commands/credential.js')).registerCredential,
};

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

const first = process.argv[2];
const wanted = first !== undefined && Object.hasOwn(COMMANDS, first) ? [first] : Object.keys(COMMANDS);
for (const name of wanted) (await COMMANDS[name]!())(program);

await program.parseAsync(process.argv);
