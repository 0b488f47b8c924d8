/**
 * Says, once, when a chat is about to end: its tokens left (to its max_tokens) at the pace of its
 * tokens so far take under `withinMs`. The worker passes it on to the hub, which leases the worker's
 * next task then, so the task is there when the sequence frees: a hub guessing the end from the mean
 * run time of recent tasks missed a 16-token task's end by more than the worker's 50 ms hold for most
 * tasks under load. A chat that ends early (a stop, end of text) says nothing: its result is the word.
 */
export class EndingWatch {
  private count = 0;
  private last: number | undefined;
  private msPerToken: number | undefined;
  private said = false;

  constructor(
    private readonly maxTokens: number | undefined,
    private readonly withinMs: number,
    private readonly say: () => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** `n` more tokens were generated. */
  tokens(n: number): void {
    if (this.said || n <= 0 || !(this.maxTokens !== undefined && this.maxTokens > 0)) return;
    const t = this.now();
    // The first token's wait holds the prompt's evaluation: the pace is taken from the later ones.
    if (this.last !== undefined) {
      const per = (t - this.last) / n;
      this.msPerToken = this.msPerToken === undefined ? per : this.msPerToken + PACE_EWMA * (per - this.msPerToken);
    }
    this.last = t;
    this.count += n;
    const left = this.maxTokens - this.count;
    if (left <= 0 || this.msPerToken === undefined || left * this.msPerToken > this.withinMs) return;
    this.said = true;
    this.say();
  }
}

/** Weight of the newest token's interval in the pace (steps vary with the batch). */
const PACE_EWMA = 0.3;
