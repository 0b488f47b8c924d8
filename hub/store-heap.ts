import v8 from 'node:v8';

/**
 * How far V8 lets the hub's heap grow past what the last full collection found live, in percent.
 * The hub's live heap is mostly the hot state's prompts and results (the retention horizon's count
 * times a task's size), and every task passes several times that through the heap as garbage
 * (the parsed upload, journal lines, frames). V8 otherwise picks a factor of up to 4x from its
 * own speed against the program's, so the hub's RSS swung between 1.5x and 4x its live bytes with
 * the load; at 1.5x it stays near 1.5x, for a few percent more CPU (docs/performance.md, "The hub's RSS").
 */
export const HUB_HEAP_GROWING_PERCENT = 50;

/** For the hub's own process only (`swarm hub`): a library hub shares its process's heap with others. */
export function boundHeapGrowth(percent = HUB_HEAP_GROWING_PERCENT): void {
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
