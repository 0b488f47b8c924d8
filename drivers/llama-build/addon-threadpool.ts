/**
 * A third change to node-llama-cpp's addon source: the context decodes on a threadpool that lives as
 * long as its thread count, attached with llama_attach_threadpool, as llama-server's common init does.
 *
 * As shipped, the addon attaches none, and ggml's CPU backend built without OpenMP (node-llama-cpp's
 * CPU variants are) then makes a disposable pool for every graph: each decode step creates its
 * threads and joins them (seen from /proc/PID/task: a thread id more per step at two threads). A
 * created thread is a new task to the scheduler and waits behind what already runs there; a pool's
 * worker that polled and then slept on its condition is woken as a running task is. The bare
 * llama-server it is measured against runs OpenMP's persistent team.
 *
 * A pool is made with the context and for each new count setThreads sets; each is kept (ggml pauses the
 * one switched away from at the next graph) and all are freed after the context. Its functions live in the CPU backend, which
 * the addon loads at run time (GGML_BACKEND_DL): they are found through the backend registry, and where
 * they are not the context keeps ggml's disposable pools.
 */

import { splice } from './addon-splice.js';

/**
 * How long a pool's workers poll for the next graph before they sleep (ggml's 0-100; llama.cpp's own
 * tools use 50, about 6.5M pause loops). On 2 cores beside 2 busy processes, a two-thread engine's
 * 1,536 tokens took 8.9-9.1 s polling at 50 where the pool that sleeps at once (0) took 15.9-16.3 s and
 * a pool per graph 16.4-24.3 s: a sleeping worker waits for a slice to wake. With no such load the wall
 * was the same all three ways and polling cost 10-40% more CPU. SWARM_THREADPOOL_POLL overrides it.
 */
export const THREADPOOL_POLL = 50;

const INCLUDE_AT = '#include <shared_mutex>\n';
const MEMBERS_AT = '        bool disposed = false;\n        bool memoryDisposed = false;\n';
const MEMBERS = [
  '        // Threadpools of our own (addon-threadpool.ts), one per thread count used, freed after the context.',
  '        std::vector<std::pair<int32_t, ggml_threadpool_t>> swarmThreadpools;',
  '        int32_t swarmThreadpoolThreads = 0;',
  '        void (*swarmThreadpoolFree)(ggml_threadpool_t) = nullptr;',
  '        void swarmAttachThreadpool(int32_t threads);',
  '',
].join('\n');

const FREE_AT = '        llama_free(currentCtx);\n';
const FREE = [
  '        llama_free(currentCtx);',
  '        for (auto& pool : swarmThreadpools) {',
  '            if (swarmThreadpoolFree != nullptr) {',
  '                swarmThreadpoolFree(pool.second);',
  '            }',
  '        }',
  '        swarmThreadpools.clear();',
  '        swarmThreadpoolThreads = 0;',
  '',
].join('\n');

const SET_AT = '        llama_set_n_threads(ctx, resolvedThreads, resolvedThreads);\n    }\n';
const SET = '        llama_set_n_threads(ctx, resolvedThreads, resolvedThreads);\n    }\n    swarmAttachThreadpool(resolvedThreads);\n';

// The context's first pool, where it is made: the engine's own decode loop with a fixed count never
// calls setThreads.
const INIT_AT = '                context->contextLoaded = context->ctx != nullptr;\n';
const INIT = INIT_AT + '                if (context->contextLoaded) {\n                    context->swarmAttachThreadpool(context->context_params.n_threads);\n                }\n';

const DEFINE_AT = 'Napi::Value AddonContext::SetThreads(const Napi::CallbackInfo& info) {';
const DEFINE = String.raw`#include <cstdlib>
// The context's pool for this many threads (addon-threadpool.ts), made once per count and kept until
// the context is freed: ggml's CPU backend pauses the pool it used last when the next graph runs on
// another, so a pool switched away from is still touched after the switch (freeing it then was a
// use after free: an assertion in pthread_mutex_lock). The tuner moves among a few counts.
void AddonContext::swarmAttachThreadpool(int32_t threads) {
    if (ctx == nullptr || threads < 1 || swarmThreadpoolThreads == threads) {
        return;
    }
    ggml_threadpool_t pool = nullptr;
    for (auto& kept : swarmThreadpools) {
        if (kept.first == threads) {
            pool = kept.second;
        }
    }
    if (pool == nullptr) {
        ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        if (cpu == nullptr) {
            return;
        }
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cpu);
        auto make = (ggml_threadpool_t (*)(struct ggml_threadpool_params*)) ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
        auto release = (void (*)(ggml_threadpool_t)) ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
        if (make == nullptr || release == nullptr) {
            return;
        }
        struct ggml_threadpool_params params = ggml_threadpool_params_default(threads);
        params.poll = ${THREADPOOL_POLL};
        const char* poll = std::getenv("SWARM_THREADPOOL_POLL");
        if (poll != nullptr && *poll >= '0' && *poll <= '9') {
            params.poll = (uint32_t) std::min(100L, std::strtol(poll, nullptr, 10));
        }
        pool = make(&params);
        if (pool == nullptr) {
            return;
        }
        swarmThreadpoolFree = release;
        swarmThreadpools.emplace_back(threads, pool);
    }
    llama_attach_threadpool(ctx, pool, nullptr);
    swarmThreadpoolThreads = threads;
}

`;

/** AddonContext.cpp with the pool made in setThreads and freed after the context (unchanged when it already is). */
export function patchThreadpool(source: string): string {
  if (source.includes('AddonContext::swarmAttachThreadpool')) return source;
  let s = splice(source, FREE_AT, FREE, 'replace', 'AddonContext.cpp');
  s = splice(s, SET_AT, SET, 'replace', 'AddonContext.cpp');
  s = splice(s, INIT_AT, INIT, 'replace', 'AddonContext.cpp');
  return splice(s, DEFINE_AT, DEFINE, 'before', 'AddonContext.cpp');
}

/** AddonContext.h with the pool's members declared (unchanged when they already are). */
export function patchThreadpoolHeader(source: string): string {
  if (source.includes('swarmThreadpools')) return source;
  const withMembers = splice(source, MEMBERS_AT, MEMBERS, 'before', 'AddonContext.h');
  return splice(withMembers, INCLUDE_AT, '#include <utility>\n#include <vector>\n', 'after', 'AddonContext.h');
}
