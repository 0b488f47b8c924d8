import fs from 'node:fs';
import type { Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { makeArithmetic, makeMultipleChoice, makeWordProblems } from '../../topologies/experiment/index.js';
import { fail } from '../exit.js';
import { int } from '../options.js';

/** The offline tasks: each answer is one number, so one scorer ({type: exact, extract: last_number}) serves all three. */
const TASKS = {
  arithmetic: { make: makeArithmetic, what: 'Du et al. 2023: a+b*c+d-e*f over six integers in [0, 30)' },
  'word-problems': { make: makeWordProblems, what: 'multi-step word problems from templates, one integer answer' },
  'multiple-choice': { make: makeMultipleChoice, what: 'four-option questions from templates (category, opposite, next month); the answer is the option\'s number' },
} as const;
type Task = keyof typeof TASKS;

export function registerDataset(program: Command): void {
  const ds = program.command('dataset').description('make datasets for experiments (JSONL: id, question, expected), offline');
  ds.command('make')
    .description(`write a generated task: ${Object.entries(TASKS).map(([k, v]) => `${k} (${v.what})`).join('; ')}`)
    .argument('<task>', Object.keys(TASKS).join(' | '))
    .option('--n <n>', 'items', int('--n', 1), 100)
    .option('--seed <s>', 'seed (the same n and seed give the same items)', int('--seed', 0), 1)
    .option('-o, --out <file>', 'output file ("-" for stdout; default <task>-<n>-s<seed>.jsonl)')
    .option('--json', 'print JSON', false)
    .action((task: string, o: { n: number; seed: number; out?: string; json: boolean }) => {
      try {
        if (!Object.hasOwn(TASKS, task)) throw new SwarmError('SWARM_ERR_CONFIG', `unknown task "${task}" (known: ${Object.keys(TASKS).join(', ')})`);
        const text = TASKS[task as Task].make(o.n, o.seed).map((i) => JSON.stringify(i)).join('\n') + '\n';
        const out = o.out ?? `${task}-${o.n}-s${o.seed}.jsonl`;
        if (out === '-') { process.stdout.write(text); return; }
        fs.writeFileSync(out, text);
        process.stdout.write(o.json ? `${JSON.stringify({ file: out, items: o.n, seed: o.seed })}\n` : `wrote ${o.n} ${task} items to ${out} (seed ${o.seed}); use it as inputs.dataset with scorer {type: exact, extract: last_number}\n`);
      } catch (err) { fail(err, o.json); }
    });
}
