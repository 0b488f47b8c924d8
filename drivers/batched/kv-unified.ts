/**
 * A unified KV cache for the engine's context, where the binding takes it.
 *
 * node-llama-cpp 3.x hard-wires `kv_unified = false`: each sequence is a KV stream of its own, and
 * llama.cpp then batches only runs of consecutive sequence ids, so three busy agents among idle ones
 * (sequences 3, 9 and 17) cost a pass over the weights each, and a prompt prefix copied between
 * sequences copies a whole stream. The self-built addon (`swarm engine build --addon`) reads a
 * `kvUnified` option; node-llama-cpp passes the binding only the options it knows, so the option is
 * added where it constructs the binding's context, for this one creation.
 */
import type { Llama } from 'node-llama-cpp';

type Bindings = { AddonContext?: new (model: unknown, options: Record<string, unknown>) => unknown };

/**
 * Run `make` (which creates the context) with every AddonContext built with `kvUnified: true`.
 * Returns whether the option was passed: false when node-llama-cpp's internals moved (the context is
 * then made as before, not unified).
 */
export async function withKvUnified<T>(llama: Llama, make: () => Promise<T>): Promise<{ value: T; unified: boolean }> {
  const bindings = (llama as unknown as { _bindings?: Bindings })._bindings;
  const Orig = bindings?.AddonContext;
  if (!bindings || typeof Orig !== 'function') return { value: await make(), unified: false };
  bindings.AddonContext = new Proxy(Orig, {
    construct(target, args: unknown[]) {
      const [model, options] = args as [unknown, Record<string, unknown> | undefined];
      return new target(model, { ...(options ?? {}), kvUnified: true }) as object;
    },
  });
  try {
    return { value: await make(), unified: true };
  } finally {
    bindings.AddonContext = Orig;
  }
}
