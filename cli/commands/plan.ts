import { DEFAULT_ENGINE } from '../shared-engine.js';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { parseSize } from '../../protocol/bytes.js';
import { formatPlan, plan, readModelShape, type EngineMode } from '../../deploy/plan/index.js';
import { fail } from '../exit.js';
import { int } from '../options.js';
import { PROCS_HELP, parseProcs, type Procs } from '../procs.js';


interface PlanFlags {
  agents: number; model: string; ram: number; cpus: number; ctx: number; engine: EngineMode; ubatch: number;
  repack: boolean; reserve: number; json: boolean; procs: Procs;
}

function size(name: string) {
  return (v: string): number => {
    try { return parseSize(v); } catch { throw new InvalidArgumentError(`${name}: not a size (e.g. 16G, 512M)`); }
  };
}

/** `swarm plan`: how many agents of a model fit on a machine, from the GGUF header. */
export function registerPlan(program: Command): void {
  program.command('plan')
    .description('capacity plan: memory per agent and how many agents fit, from the model\'s GGUF header')
    .requiredOption('--agents <n>', 'agents wanted', int('--agents', 1))
    .requiredOption('--model <file>', 'GGUF model file (only its header is read)')
    // Defaults shown as the user writes them (16G), not as the byte counts they parse to.
    .addOption(new Option('--ram <size>', 'machine memory (16G = 16 GiB; 16GB = 16e9 bytes)').argParser(size('--ram')).default(16 * 1024 ** 3, '16G'))
    .option('--cpus <n>', 'vCPUs', int('--cpus', 1), 4)
    .option('--ctx <n>', 'context tokens per agent', int('--ctx', 16), 2048)
    .option('--engine <mode>', 'per-worker (an engine per agent), batched or shared (one batched engine for all)', (v: string) => {
      if (v !== 'per-worker' && v !== 'shared' && v !== 'batched') throw new InvalidArgumentError('--engine must be per-worker, batched or shared');
      return v;
    }, DEFAULT_ENGINE)
    .option('--procs <n>', `as \`swarm up --procs\` (with --cpus for auto): ${PROCS_HELP}`, parseProcs, 'auto')
    .option('--ubatch <n>', 'llama.cpp micro-batch (-ub)', int('--ubatch', 1), 512)
    .option('--no-repack', 'plan for llama-server --no-repack (Q4 weights stay shared)')
    .addOption(new Option('--reserve <size>', 'memory for the OS, runtime and k3s').argParser(size('--reserve')).default(2 * 1024 ** 3, '2G'))
    .option('--json', 'print the plan as one JSON object', false)
    .action(async (o: PlanFlags) => {
      try {
        const shape = await readModelShape(o.model).catch((err: unknown) => {
          throw new SwarmError('SWARM_ERR_CONFIG', `cannot read GGUF ${o.model}: ${err instanceof Error ? err.message : String(err)}`);
        });
        const p = plan(shape, {
          agents: o.agents, ramBytes: o.ram, cpus: o.cpus, ctx: o.ctx, engine: o.engine, ubatch: o.ubatch,
          repack: o.repack, reserveBytes: o.reserve, procs: o.procs,
        });
        process.stdout.write(o.json ? JSON.stringify(p) + '\n' : formatPlan(p));
      } catch (err) { fail(err, o.json); }
    });
}
