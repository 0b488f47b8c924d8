/**
 * The built-in demo model: a tiny random-weight llama GGUF that swarm writes with its own code, so that
 * `swarm up` works offline on a fresh machine with no model given. Its text is noise.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { buildDemoModel, DEMO_VERSION } from './model.js';

export { buildDemoModel, DEMO_SHAPE, DEMO_VERSION } from './model.js';
export { encodeGguf, type GgufTensor, type GgufValue } from './gguf.js';

/** The one line to tell a user who got the demo model. */
export const DEMO_MODEL_NOTICE =
  'no model given: using the built-in demo model, which has random weights, so its text is noise. ' +
  'For real text use --model path/to/model.gguf (or SWARM_MODEL), or an hf: URI such as --model hf:user/repo:Q4_K_M';

/** swarm's model cache: $XDG_CACHE_HOME/swarm/models, else ~/.cache/swarm/models. */
export function modelCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME && path.isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : path.join(os.homedir(), '.cache');
  return path.join(base, 'swarm', 'models');
}

/** Where the demo model lives (it may not exist yet). */
export function demoModelPath(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(modelCacheDir(env), `swarm-demo-random-v${DEMO_VERSION}.gguf`);
}

/**
 * The demo model's path, writing it first if it is not cached. The file is written to a temporary
 * name and renamed, so a reader never sees half a file and concurrent callers are safe (they write
 * the same bytes; the last rename wins).
 */
export async function ensureDemoModel(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const file = demoModelPath(env);
  if (fs.existsSync(file)) return file;
  await fs.promises.mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await fs.promises.writeFile(tmp, buildDemoModel());
    await fs.promises.rename(tmp, file);
  } catch (err) {
    await fs.promises.rm(tmp, { force: true });
    throw err;
  }
  return file;
}
