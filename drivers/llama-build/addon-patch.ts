/**
 * The changes the self-built addon makes to node-llama-cpp's source. First, AddonContext.cpp hard-wires
 * `kv_unified = false`, so llama.cpp gives each sequence a KV stream of its own and batches only
 * runs of consecutive sequence ids (a few busy agents among idle ones cost a pass over the weights
 * each), and copying a prompt prefix between sequences copies a whole stream. The patch reads a
 * `kvUnified` option of the context; without it the addon behaves as the prebuilt one. Second, a
 * method that decodes a batch and samples it in one native call (addon-fused-step.ts). Third, a
 * threadpool that outlives the decode steps (addon-threadpool.ts).
 */
import { patchFusedStep, patchFusedStepHeader } from './addon-fused-step.js';
import { patchThreadpool, patchThreadpoolHeader } from './addon-threadpool.js';
import { splice } from './addon-splice.js';

/** Names the patch in the cache key: another patch is another cache entry. */
export const ADDON_PATCH_ID = 'kvUnified-option-1+fused-step-2+threadpool-5';

/** What the patched addon offers beyond node-llama-cpp's own (BUILD_INFO.json's `options`). */
export const ADDON_EXTRAS = ['kvUnified', 'decodeBatchAndSample', 'decodeBatchAndSampleSync', 'threadpool'];

const ANCHOR = '        if (options.Has("sequences")) {';
const READ = [
  '        if (options.Has("kvUnified")) {',
  '            context_params.kv_unified = options.Get("kvUnified").As<Napi::Boolean>().Value();',
  '        }',
  '',
  '',
].join('\n');

/**
 * AddonContext.cpp with the `kvUnified` option read and the fused step defined; throws when the
 * source no longer looks as expected. Its header needs patchAddonContextHeader.
 */
export function patchAddonContext(source: string): string {
  return patchThreadpool(patchFusedStep(readKvUnified(source)));
}

/** AddonContext.h with the fused step declared. */
export function patchAddonContextHeader(source: string): string {
  return patchThreadpoolHeader(patchFusedStepHeader(source));
}

function readKvUnified(source: string): string {
  if (source.includes('options.Has("kvUnified")')) return source;
  if (!source.includes('context_params.kv_unified')) throw new Error('AddonContext.cpp sets no kv_unified: this node-llama-cpp is not the one the patch was written for');
  return splice(source, ANCHOR, READ, 'before', 'AddonContext.cpp');
}
