/** Bytes counted per piece on top of its text, so a flood of empty pieces is bounded too. */
const PIECE_OVERHEAD = 16;

/** What `finish` gives: the whole answer, or why it cannot be put together. */
export type Finished = { ok: true; text: string } | { ok: false; why: string };

/**
 * The pieces of one streamed answer (TASK_RES `done:false` frames), put together by `seq`
 * (PROTOCOL.md 4.5). TCP keeps a connection's order, but a worker may write pieces out of order
 * (several threads) or twice (a retried write): duplicates are dropped, gaps are found when the
 * final frame arrives. A piece without `seq` takes the one after the highest seen (arrival order).
 */
export class Answer {
  private readonly pieces = new Map<number, string>();
  private nextSeq = 0;
  private maxSeq = -1;
  /** Text held plus a per-piece overhead; the hub bounds it. */
  bytes = 0;
  duplicates = 0;

  /** Characters of text held so far (live views estimate the tokens streamed from it). */
  chars = 0;

  /** Add a `done:false` piece. False when its `seq` was seen already (the first one is kept). */
  add(text: string, seq?: number): boolean {
    const s = seq ?? this.nextSeq;
    if (this.pieces.has(s)) { this.duplicates++; return false; }
    this.pieces.set(s, text);
    this.bytes += text.length + PIECE_OVERHEAD;
    this.chars += text.length;
    if (s > this.maxSeq) this.maxSeq = s;
    if (s >= this.nextSeq) this.nextSeq = s + 1;
    return true;
  }

  /** The pieces from `from` on, in order, up to the first gap, and the seq after them (live views read along). */
  since(from: number): { text: string; next: number } {
    let text = '';
    let i = from;
    for (let p = this.pieces.get(i); p !== undefined; p = this.pieces.get(++i)) text += p;
    return { text, next: i };
  }

  /** The final frame (`done:true`): every piece 0 … its seq − 1 must be there, none after it. */
  finish(text: string, seq?: number): Finished {
    const last = seq ?? this.nextSeq;
    if (this.maxSeq > last) return { ok: false, why: `final frame has seq ${last} but a piece had seq ${this.maxSeq}` };
    const dup = this.pieces.get(last);
    if (dup !== undefined && dup !== text) return { ok: false, why: `seq ${last} used by a piece and by the final frame` };
    if (dup === undefined && this.pieces.size !== last) {
      return { ok: false, why: `final frame has seq ${last}: ${last - this.pieces.size} piece(s) missing (first ${this.firstMissing(last)})` };
    }
    if (dup !== undefined && this.pieces.size !== last + 1) {
      return { ok: false, why: `final frame has seq ${last}: ${last + 1 - this.pieces.size} piece(s) missing (first ${this.firstMissing(last)})` };
    }
    const parts: string[] = new Array(last + 1);
    for (let i = 0; i < last; i++) parts[i] = this.pieces.get(i)!;
    parts[last] = text;
    return { ok: true, text: parts.join('') };
  }

  private firstMissing(last: number): number {
    for (let i = 0; i < last; i++) if (!this.pieces.has(i)) return i;
    return last;
  }
}
