import dns from 'node:dns/promises';
import fs from 'node:fs';
import { SwarmError } from '../../protocol/index.js';
import { modelCacheDir } from '../demo-model/index.js';

/** True for the model URIs node-llama-cpp resolves by downloading (`hf:…`, `https://…`). */
export function isModelUri(model: string): boolean {
  return /^(hf:|huggingface:|https?:\/\/)/i.test(model);
}

const why = (err: unknown): string => (err instanceof Error ? (err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message) : String(err));

/**
 * A local path for `model`: a path is returned as is (it must exist); an `hf:` or https URI is
 * resolved by node-llama-cpp into swarm's model cache, downloading it if needed. Offline this fails
 * quickly with the reason (node-llama-cpp alone would retry for minutes); a download that stalls for
 * `stallMs` is cancelled. Errors are SWARM_ERR_ENGINE_START.
 */
export async function resolveModel(model: string, opts: { stallMs?: number; onProgress?: (done: number, total: number) => void } = {}): Promise<string> {
  if (!isModelUri(model)) {
    if (!fs.existsSync(model)) throw new SwarmError('SWARM_ERR_ENGINE_START', `model file not found: ${model}`);
    return model;
  }
  const { resolveModelFile } = await import('node-llama-cpp');
  const directory = modelCacheDir();
  // Already downloaded? This asks the network nothing when the file is there.
  try {
    const p = await resolveModelFile(model, { directory, download: false, cli: false, signal: AbortSignal.timeout(5000) });
    if (fs.existsSync(p)) return p;
  } catch { /* not cached, or the name needs the network: download below */ }

  const host = /^https?:\/\//i.test(model) ? new URL(model).hostname : 'huggingface.co';
  try {
    await Promise.race([
      dns.lookup(host),
      new Promise((_, reject) => setTimeout(() => reject(new Error('DNS lookup timed out')), 5000).unref()),
    ]);
  } catch (err) {
    throw new SwarmError('SWARM_ERR_ENGINE_START', `cannot download ${model}: ${host} is unreachable (${why(err)}); are we offline? Use a local file: --model path/to/model.gguf`, { cause: err });
  }

  const stallMs = opts.stallMs ?? 30_000;
  const ac = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => { clearTimeout(timer); timer = setTimeout(() => ac.abort(new Error(`no progress for ${stallMs} ms`)), stallMs); timer.unref(); };
  arm();
  try {
    return await resolveModelFile(model, {
      directory, cli: false, signal: ac.signal,
      onProgress: ({ downloadedSize, totalSize }) => { arm(); opts.onProgress?.(downloadedSize, totalSize); },
    });
  } catch (err) {
    const reason = ac.signal.aborted ? why(ac.signal.reason) : why(err);
    throw new SwarmError('SWARM_ERR_ENGINE_START', `cannot download ${model}: ${reason}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}
