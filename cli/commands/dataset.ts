import fs from 'node:fs';
import type { Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { makeArithmetic } from '../../topologies/experiment/index.js';
import { fail } from '../exit.js';
import { int } from '../options.js';

const TASKS = ['arithmetic'] as const;

export function registerDataset(program: Command): void {
  const ds = program.command('dataset').description('make datasets for experiments (JSONL: id, question, expected), offline');
  ds.command('make')
    .description(`write a generated task: ${TASKS.join(', ')} (Du et al. 2023: a+b*c+d-e*f over six integers in [0, 30), exact-match scoring)`)
    .argument('<task>', TASKS.join(' | '))
    .option('--n <n>', 'items', int('--n', 1), 100)
    .option('--seed <s>', 'seed (the same n and seed give the same items)', int('--seed', 0), 1)
    .option('-o, --out <file>', 'output file ("-" for stdout; default <task>-<n>-s<seed>.jsonl)')
    .option('--json', 'print JSON', false)
    .action((task: string, o: { n: number; seed: number; out?: string; json: boolean }) => {
      try {
        if (!(TASKS as readonly string[]).includes(task)) throw new SwarmError('SWARM_ERR_CONFIG', `unknown task "${task}" (known: ${TASKS.join(', ')})`);
        const text = makeArithmetic(o.n, o.seed).map((i) => JSON.stringify(i)).join('\n') + '\n';
        const out = o.out ?? `${task}-${o.n}-s${o.seed}.jsonl`;
        if (out === '-') { process.stdout.write(text); return; }
        fs.writeFileSync(out, text);
        process.stdout.write(o.json ? `${JSON.stringify({ file: out, items: o.n, seed: o.seed })}\n` : `wrote ${o.n} ${task} items to ${out} (seed ${o.seed}); use it as inputs.dataset with scorer {type: exact, extract: last_number}\n`);
      } catch (err) { fail(err, o.json); }
    });
}
