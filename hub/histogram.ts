/** A fixed-bucket histogram (Prometheus style) that also answers quantiles from a bounded reservoir. */
export class Histogram {
  readonly buckets: number[];
  private readonly counts: number[];
  count = 0;
  sum = 0;
  private readonly sample: number[] = [];
  private readonly maxSample: number;
  private seen = 0;
  /** The reservoir sorted, kept until the next observation: a status asks for two quantiles at once, every few seconds. */
  private sorted?: Float64Array;

  constructor(buckets: number[], maxSample = 20_000) {
    this.buckets = buckets;
    this.counts = new Array(buckets.length).fill(0);
    this.maxSample = maxSample;
  }

  observe(v: number): void {
    this.count++;
    this.sum += v;
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]!) { this.counts[i]!++; break; }
    this.seen++;
    this.sorted = undefined;
    if (this.sample.length < this.maxSample) this.sample.push(v);
    else {
      const j = Math.floor(Math.random() * this.seen);
      if (j < this.maxSample) this.sample[j] = v;
    }
  }

  quantile(q: number): number {
    if (this.sample.length === 0) return 0;
    // A typed array sorts numbers without a comparator call per compare (20,000 of them took ms a call).
    const s = (this.sorted ??= Float64Array.from(this.sample).sort());
    return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  }

  /** Prometheus exposition lines for this histogram. */
  render(name: string, help: string): string {
    const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} histogram`];
    let cum = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      cum += this.counts[i]!;
      lines.push(`${name}_bucket{le="${this.buckets[i]}"} ${cum}`);
    }
    lines.push(`${name}_bucket{le="+Inf"} ${this.count}`, `${name}_sum ${this.sum}`, `${name}_count ${this.count}`);
    return lines.join('\n');
  }
}
