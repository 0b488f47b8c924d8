import { Command } from 'commander';
import { SwarmError } from '../protocol/errors.js';
import { EXIT_HELP, Exit, fail, quietOnClosedPipe } from './exit.js';
import { VERSION } from './state.js';

export type Register = (program: Command) => void;

/**
 * Commands, loaded on demand: a worker process (25 of them on a small VPS) loads only the worker
 * command and what it needs, and `swarm --help` loads none (their terms and descriptions are here),
 * so the first command a newcomer types answers at once.
 */
const COMMANDS: Record<string, { term: string; about: string; load: () => Promise<Register> }> = {
  up: { term: 'up [options]', about: 'start a hub and N workers as one supervised swarm', load: async () => (await import('./commands/up.js')).registerUp },
  hub: { term: 'hub [options]', about: 'run the hub alone (workers join with `swarm worker`)', load: async () => (await import('./commands/hub.js')).registerHub },
  worker: { term: 'worker [options]', about: 'run one or more workers that join a hub', load: async () => (await import('./commands/worker.js')).registerWorker },
  status: { term: 'status [options]', about: 'show the running swarm: hub, workers, tasks (and, if the hub is down, the failover mode)', load: async () => (await import('./commands/status.js')).registerStatus },
  submit: { term: 'submit [options] [text]', about: 'submit a task (TEXT) or many (--file tasks.jsonl)', load: async () => (await import('./commands/submit.js')).registerSubmit },
  down: { term: 'down [options]', about: 'stop the swarm of this state directory; no process of it is left behind', load: async () => (await import('./commands/down.js')).registerDown },
  engine: { term: 'engine', about: 'llama.cpp engine programs (swarm engine build)', load: async () => (await import('./commands/engine.js')).registerEngine },
  run: { term: 'run [options] [experiment]', about: 'run an experiment (a topology over the swarm) and write its run folder', load: async () => (await import('./commands/run.js')).registerRun },
  runs: { term: 'runs', about: 'list, show, compare and cancel recorded runs', load: async () => (await import('./commands/runs.js')).registerRuns },
  results: { term: 'results [options]', about: 'read the results archive: finished tasks past the --retain horizon', load: async () => (await import('./commands/results.js')).registerResults },
  sweep: { term: 'sweep [options] <experiment>', about: 'run an experiment over a grid of settings and seeds (resumable)', load: async () => (await import('./commands/sweep.js')).registerSweep },
  dataset: { term: 'dataset', about: 'make datasets for experiments (JSONL: id, question, expected), offline', load: async () => (await import('./commands/dataset.js')).registerDataset },
  plan: { term: 'plan [options]', about: 'capacity plan: memory per agent and how many agents fit, from the GGUF header', load: async () => (await import('./commands/plan.js')).registerPlan },
  deploy: { term: 'deploy', about: 'deployment files for Podman and k3s (swarm deploy render)', load: async () => (await import('./commands/deploy.js')).registerDeploy },
  dashboard: { term: 'dashboard [options]', about: 'print a one-time link to the live dashboard of the running swarm', load: async () => (await import('./commands/dashboard.js')).registerDashboard },
  top: { term: 'top [options]', about: 'live terminal view of the running swarm (q quits; plain lines when not a terminal)', load: async () => (await import('./commands/top.js')).registerTop },
  certs: { term: 'certs [options]', about: 'make a CA, a certificate per host and a token, for a swarm across machines', load: async () => (await import('./commands/certs.js')).registerCerts },
  credential: { term: 'credential [options] [worker-id]', about: 'print the credential a worker uses to join as <worker-id> only', load: async () => (await import('./commands/credential.js')).registerCredential },
};

/**
 * Run the `swarm` command line (cli/main.ts starts it). `preloaded`: commands whose code the caller
 * has loaded already (the hub's bundle, cli/hub-main.ts), used instead of loading them.
 */
export async function runCli(preloaded: Record<string, Register> = {}): Promise<void> {
  quietOnClosedPipe();
  const argv = process.argv;
  const json = argv.includes('--json');

  const program = new Command()
    .name('swarm')
    .description('Run many local LLM agents as processes and organise them into multi-agent topologies.')
    .version(VERSION)
    .addHelpText('after', `
  ${EXIT_HELP}
  Errors print \`swarm: SWARM_ERR_…: message\` and a hint (with --json: {"error":{"code","msg","hint"}}).
  State lives in ./.swarm (--state-dir or SWARM_STATE_DIR). Docs: README.md, docs/, protocol/PROTOCOL.md.`);

  // Before the commands are added, so that they inherit both. A usage error is one `swarm: …` line
  // and a hint, exit 2, not commander's line followed by the whole help.
  program.configureOutput({ outputError: () => {} });
  program.exitOverride((err) => {
    if (err.exitCode === 0) process.exit(Exit.OK); // --help, --version
    if (err.code === 'commander.help') process.exit(Exit.USAGE); // `swarm deploy` alone: its help, on stderr
    const hint = err.code === 'commander.unknownCommand' ? '`swarm --help` lists the commands' : undefined;
    fail(new SwarmError('SWARM_ERR_CONFIG', err.message.replace(/^error: /, '').replace(/\n/g, ' ')), json, { exit: Exit.USAGE, ...(hint ? { hint } : {}) });
  });

  const first = argv[2] === 'help' ? argv[3] : argv[2];
  if (first !== undefined && Object.hasOwn(COMMANDS, first)) {
    (preloaded[first] ?? await COMMANDS[first]!.load())(program);
  } else {
    // The top-level help, or an unknown command: names and descriptions only, nothing imported.
    for (const [name, c] of Object.entries(COMMANDS)) program.command(name).description(c.about);
    program.configureHelp({ subcommandTerm: (cmd) => COMMANDS[cmd.name()]?.term ?? cmd.name() });
  }

  await program.parseAsync(argv).catch((err: unknown) => fail(err, json));
}
