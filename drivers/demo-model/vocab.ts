/**
 * The demo model's vocabulary: a small SentencePiece-style (llama "SPM") vocab that llama.cpp's
 * tokenizer accepts. It has the three control tokens, all 256 byte-fallback tokens (so any text
 * tokenizes, and grammars can emit any byte), printable ASCII, and whole words with every prefix
 * (so prompts merge into word tokens the way a trained SPM vocab would).
 */

/** llama.cpp token types. */
export const TokenType = { normal: 1, unknown: 2, control: 3, byte: 6 } as const;

/** How likely the random model is to emit each kind of token (a logit bias class). */
export type TokenKind = 'control' | 'eos' | 'byte' | 'char' | 'punct' | 'prefix' | 'word';

export interface DemoVocab { tokens: string[]; scores: number[]; types: number[]; kinds: TokenKind[] }

/** Words of a children's story; the demo model strings them together at random. */
const WORDS = (
  'once upon a time there was little girl boy named lily tom ben sue she he they it loved liked wanted to play ' +
  'with her his their big small red blue green happy sad dog cat bird tree ball park house mom dad friend ' +
  'one day went the and but so then saw said found looked at in on up down out of for very all ' +
  'sun sky rain water fish boat toy box car truck cake apple flower garden forest river hill road ' +
  'run jump walk fly swim eat sleep sing dance laugh smile cry help share give take make see hear ' +
  'good bad nice kind funny brave shy fast slow warm cold soft hard new old bright dark loud quiet ' +
  'is was are were be had has have do did can could would will not no yes what where who why how ' +
  'this that these those here now again too also because when after before together every day night'
).split(' ');

/** Build the vocabulary (deterministic: the same list every time). */
export function demoVocab(): DemoVocab {
  const v: DemoVocab = { tokens: [], scores: [], types: [], kinds: [] };
  const seen = new Set<string>();
  const add = (t: string, type: number, kind: TokenKind, score: number): void => {
    if (seen.has(t)) return;
    seen.add(t);
    v.tokens.push(t); v.types.push(type); v.kinds.push(kind); v.scores.push(score);
  };
  add('<unk>', TokenType.unknown, 'control', 0);
  add('<s>', TokenType.control, 'control', 0);
  add('</s>', TokenType.control, 'eos', 0);
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, TokenType.byte, 'byte', 0);
  add('\u2581', TokenType.normal, 'char', -1);
  for (let c = 0x21; c < 0x7f; c++) {
    const ch = String.fromCharCode(c);
    add(ch, TokenType.normal, /[.,!?]/.test(ch) ? 'punct' : 'char', -2);
  }
  // SPM merges two pieces only if their concatenation is a token: every prefix of "▁word" must be
  // one. Longer pieces score higher, so the tokenizer prefers whole words.
  for (const w of WORDS) {
    const piece = '\u2581' + w;
    for (let i = 2; i < piece.length; i++) add(piece.slice(0, i), TokenType.normal, 'prefix', -10 + i);
    add(piece, TokenType.normal, 'word', -10 + piece.length);
  }
  return v;
}
