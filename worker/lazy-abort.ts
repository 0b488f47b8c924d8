/**
 * An AbortController made only when someone asks for its signal. Node 20 spends 4-6 us building one
 * (measured in a warm loop), a noticeable share of a short task's cost in a worker, while most tasks
 * are never aborted and a driver that answers at once never looks at the signal.
 */
export class LazyAbort {
  private controller?: AbortController;
  private why: unknown;
  private done = false;

  get aborted(): boolean { return this.done; }
  get reason(): unknown { return this.why; }

  /** The real signal; made on first use, already aborted if the abort came first. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.done) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.done) return;
    this.done = true;
    this.why = reason;
    this.controller?.abort(reason);
  }
}
