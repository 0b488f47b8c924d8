import fs from 'node:fs';
import path from 'node:path';
import { SwarmError } from '../protocol/errors.js';
// The model helpers load on demand: an echo or exec worker needs neither (startup cost of 25 workers).
const demo = () => import('../drivers/demo-model/index.js');
const embedded = () => import('../drivers/embedded/index.js');

/** Drivers that run a GGUF model with llama.cpp, and so can fall back to the demo model. */
const GGUF_DRIVERS = new Set(['embedded', 'batched', 'llama-server', 'llama-cli']);

/** The driver `swarm up`, `swarm hub` and `swarm worker` use when none is given. */
export const DEFAULT_DRIVER = 'embedded';

/** What model a swarm runs, and whether it is the noise-making demo. */
export interface ChosenModel { path?: string; demo: boolean }

/**
 * Resolve the model once, before workers start: `--model`, else env SWARM_MODEL, else (for a llama.cpp
 * driver) the built-in demo model, with one line on stderr saying its text is noise. An `hf:` URI is
 * downloaded here, so that every worker gets the same local path and none downloads on its own.
 */
export async function chooseModel(driver: string, given: string | undefined, opts: { quiet?: boolean } = {}): Promise<ChosenModel> {
  const model = given ?? (process.env.SWARM_MODEL || undefined);
  if (model) {
    const { isModelUri, resolveModel } = await embedded();
    if (isModelUri(model)) {
      if (!opts.quiet) process.stderr.write(`resolving ${model} (downloading it if it is not cached)…\n`);
      return { path: await resolveModel(model), demo: false };
    }
    // A missing file, or one that is not a model, fails here, once, rather than in every worker
    // (which would say ready and fail the first task).
    if (!GGUF_DRIVERS.has(driver)) return { path: model, demo: false };
    // A missing file is a bad --model like a file that is not GGUF: the same code and exit (2).
    if (!fs.existsSync(path.resolve(model))) throw new SwarmError('SWARM_ERR_CONFIG', `--model ${path.resolve(model)}: no such file; give a .gguf file or an hf: URI`);
    const p = await resolveModel(path.resolve(model));
    checkGguf(p);
    return { path: p, demo: false };
  }
  if (!GGUF_DRIVERS.has(driver)) return { demo: false };
  const { DEMO_MODEL_NOTICE, ensureDemoModel } = await demo();
  const p = await ensureDemoModel();
  if (!opts.quiet) process.stderr.write(`${DEMO_MODEL_NOTICE}\n`);
  return { path: p, demo: true };
}

/** Refuse a file that is not GGUF (its first 4 bytes are "GGUF"): a notes.txt is not a model. */
function checkGguf(file: string): void {
  const head = Buffer.alloc(4);
  let n = 0;
  try {
    const fd = fs.openSync(file, 'r');
    try { n = fs.readSync(fd, head, 0, 4, 0); } finally { fs.closeSync(fd); }
  } catch (err) { throw new SwarmError('SWARM_ERR_CONFIG', `--model ${file}: ${(err as Error).message}`); }
  if (n < 4 || head.toString('latin1') !== 'GGUF') {
    throw new SwarmError('SWARM_ERR_CONFIG', `--model ${file} is not a GGUF model file (it does not start with "GGUF"); give a .gguf file or an hf: URI`);
  }
}
