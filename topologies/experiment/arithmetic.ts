import { rng } from './dataset.js';

/** One generated item, as a dataset line. */
export interface ArithmeticItem { id: string; question: string; expected: string }

/**
 * Du et al. (2023)'s arithmetic task: `a+b*c+d-e*f` over six integers drawn uniformly from [0, 30),
 * scored by exact match on the value. Seeded: the same n and seed give the same items.
 */
export function makeArithmetic(n: number, seed: number): ArithmeticItem[] {
  const r = rng(seed);
  const int = () => Math.floor(r() * 30);
  return Array.from({ length: n }, (_, i) => {
    const [a, b, c, d, e, f] = [int(), int(), int(), int(), int(), int()];
    return {
      id: `arith-${seed}-${i + 1}`,
      question: `What is the result of ${a}+${b}*${c}+${d}-${e}*${f}? Make sure to state your answer at the end of the response.`,
      expected: String(a + b * c + d - e * f),
    };
  });
}
