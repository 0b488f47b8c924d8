/**
 * Streaming stop-string filter: holds back just enough text to see a stop string split across
 * chunks, and cuts the output before the first stop string. Every driver that streams uses it.
 */
export class StopFilter {
  private held = '';
  private readonly keep: number;
  stopped = false;

  constructor(private readonly stops: string[]) {
    this.keep = Math.max(0, ...stops.map((s) => s.length - 1));
  }

  /** Text safe to emit now. After a stop string was seen, `stopped` is true and nothing more comes out. */
  push(text: string): string {
    if (this.stopped) return '';
    this.held += text;
    let first = -1;
    for (const s of this.stops) {
      if (!s) continue;
      const i = this.held.indexOf(s);
      if (i >= 0 && (first < 0 || i < first)) first = i;
    }
    if (first >= 0) {
      this.stopped = true;
      const out = this.held.slice(0, first);
      this.held = '';
      return out;
    }
    const cut = Math.max(0, this.held.length - this.keep);
    const out = this.held.slice(0, cut);
    this.held = this.held.slice(cut);
    return out;
  }

  /** The rest, when the stream ends without a stop string. */
  end(): string {
    const out = this.stopped ? '' : this.held;
    this.held = '';
    return out;
  }
}
