/** The next turn of the event loop: what is waiting (sockets, timers) runs before the caller goes on. */
export const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

/** How much one turn of the event loop encodes at most: items, and characters of their encoding. */
export interface TurnBound { items: number; chars: number }

/**
 * `items` encoded in order, at most `turn` of them in one turn of the event loop: a large batch
 * written with one fsync need not hold the loop for all of its encoding (the hub's sockets, a
 * client's submit, a worker's result, wait between two turns, never behind the whole batch).
 * A turn takes one item at least, however large.
 */
export async function encodeInTurns<T>(items: readonly T[], encode: (x: T) => string, turn: TurnBound, next: () => Promise<void> = nextTurn): Promise<string[]> {
  const out: string[] = [];
  let n = 0, chars = 0;
  for (const x of items) {
    if (n > 0 && (n >= turn.items || chars >= turn.chars)) { await next(); n = 0; chars = 0; }
    const line = encode(x);
    out.push(line);
    n++;
    chars += line.length;
  }
  return out;
}
