import { rng } from './dataset.js';

/** One generated item, as a dataset line: its question and the answer wanted. */
export interface GeneratedItem { id: string; question: string; expected: string; choices?: string[] }

const NAMES = ['Ada', 'Ben', 'Chen', 'Dina', 'Emil', 'Fatima', 'Goran', 'Hana', 'Ivo', 'Jonna', 'Kai', 'Lea'];
const THINGS = ['apples', 'pencils', 'marbles', 'stickers', 'cookies', 'stamps', 'shells', 'cards'];

/**
 * Multi-step word problems from templates (two or three operations on small integers, in the manner
 * of GSM8K's easier items), answered by one integer: score with `{type: numeric}` or `exact` with
 * `extract: last_number`. Seeded: the same n and seed give the same items.
 */
export function makeWordProblems(n: number, seed: number): GeneratedItem[] {
  const r = rng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const templates: (() => { q: string; a: number })[] = [
    () => {
      const [name, things, boxes, per, given, more] = [pick(NAMES), pick(THINGS), int(2, 9), int(3, 12), int(2, 10), int(1, 5)];
      return { q: `${name} has ${boxes} boxes with ${per} ${things} in each. ${name} gives away ${given} ${things}, then buys ${more} more boxes of the same size. How many ${things} does ${name} have now?`, a: boxes * per - given + more * per };
    },
    () => {
      const [name, price, count, bill] = [pick(NAMES), int(2, 9), int(2, 6), 0];
      const total = price * count, paid = bill || Math.ceil((total + 1) / 10) * 10 + 10 * int(0, 2);
      return { q: `${name} buys ${count} notebooks at ${price} dollars each and pays with ${paid} dollars. How many dollars of change does ${name} get?`, a: paid - total };
    },
    () => {
      const [name, a, d1, b, d2] = [pick(NAMES), int(5, 20), int(2, 6), int(10, 30), int(2, 5)];
      const read = a * d1 + b * d2, total = read + int(10, 120);
      return { q: `A book has ${total} pages. ${name} reads ${a} pages a day for ${d1} days, then ${b} pages a day for ${d2} days. How many pages are left to read?`, a: total - read };
    },
    () => {
      const [name, things, start, per, days, lost] = [pick(NAMES), pick(THINGS), int(0, 20), int(2, 8), int(3, 7), int(1, 9)];
      return { q: `${name} has ${start} ${things} and collects ${per} more every day for ${days} days, but loses ${lost} of them. How many ${things} does ${name} have at the end?`, a: start + per * days - lost };
    },
    () => {
      const [groups, size, absent, teams] = [int(2, 5), int(4, 10), int(0, 3), 0];
      const kids = groups * size - absent, t = teams || [2, 3, 4].find((k) => kids % k === 0) || 1;
      return { q: `${groups} classes of ${size} children go on a trip, but ${absent} children are ill and stay at home. The children who go are split into ${t} equal teams. How many children are in each team?`, a: kids / t };
    },
  ];
  return Array.from({ length: n }, (_, i) => {
    const { q, a } = pick(templates)();
    return { id: `word-${seed}-${i + 1}`, question: `${q} Give the answer as a number at the end of your response.`, expected: String(a) };
  });
}

const CATEGORIES: Record<string, string[]> = {
  mammal: ['whale', 'horse', 'bat', 'dolphin', 'tiger', 'rabbit', 'elephant', 'mouse'],
  bird: ['eagle', 'sparrow', 'penguin', 'owl', 'parrot', 'swan', 'crow', 'robin'],
  fish: ['trout', 'salmon', 'tuna', 'carp', 'cod', 'herring', 'pike', 'perch'],
  fruit: ['apple', 'banana', 'cherry', 'mango', 'pear', 'plum', 'grape', 'lemon'],
  vegetable: ['carrot', 'potato', 'onion', 'leek', 'cabbage', 'spinach', 'radish', 'turnip'],
  metal: ['iron', 'copper', 'silver', 'zinc', 'tin', 'gold', 'nickel', 'lead'],
};
const OPPOSITES: [string, string][] = [['hot', 'cold'], ['early', 'late'], ['heavy', 'light'], ['open', 'closed'], ['full', 'empty'], ['rich', 'poor'],
  ['wet', 'dry'], ['loud', 'quiet'], ['high', 'low'], ['fast', 'slow'], ['hard', 'soft'], ['thick', 'thin'], ['strong', 'weak'], ['young', 'old']];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/**
 * Multiple-choice items from templates (which word belongs to a category, which is the opposite of a
 * word, which month follows another), four options numbered 1-4 in the question and in `choices`;
 * `expected` is the right option's number, so `exact` with `extract: last_number` scores them like
 * the arithmetic and word problems (one scorer across the three tasks). Seeded.
 */
export function makeMultipleChoice(n: number, seed: number): GeneratedItem[] {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const shuffle = <T>(xs: T[]): T[] => { for (let i = xs.length - 1; i > 0; i--) { const j = Math.floor(r() * (i + 1)); [xs[i], xs[j]] = [xs[j]!, xs[i]!]; } return xs; };
  const distinct = (pool: string[], not: Set<string>, k: number) => shuffle(pool.filter((x) => !not.has(x))).slice(0, k);
  const templates: (() => { q: string; right: string; wrong: string[] })[] = [
    () => {
      const cat = pick(Object.keys(CATEGORIES)), right = pick(CATEGORIES[cat]!);
      const others = Object.entries(CATEGORIES).filter(([k]) => k !== cat).flatMap(([, v]) => v);
      return { q: `Which of these is a ${cat}?`, right, wrong: distinct(others, new Set(), 3) };
    },
    () => {
      const [a, b] = pick(OPPOSITES), flip = r() < 0.5;
      const word = flip ? b : a, right = flip ? a : b;
      const pool = OPPOSITES.flat();
      return { q: `Which word means the opposite of "${word}"?`, right, wrong: distinct(pool, new Set([a, b]), 3) };
    },
    () => {
      const i = Math.floor(r() * 12), right = MONTHS[(i + 1) % 12]!;
      return { q: `Which month comes right after ${MONTHS[i]}?`, right, wrong: distinct(MONTHS, new Set([right, MONTHS[i]!]), 3) };
    },
  ];
  return Array.from({ length: n }, (_, i) => {
    const t = pick(templates)();
    const choices = shuffle([t.right, ...t.wrong]);
    const opts = choices.map((c, j) => `(${j + 1}) ${c}`).join(' ');
    return { id: `mc-${seed}-${i + 1}`, question: `${t.q} ${opts}. Answer with the number of the right option.`, expected: String(choices.indexOf(t.right) + 1), choices };
  });
}
