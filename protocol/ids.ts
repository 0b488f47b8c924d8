import { customAlphabet } from 'nanoid';

const prefix = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 8)();
let counter = 0;

/** A message id unique across processes: a random per-process prefix and a counter. */
export function newId(): string {
  counter++;
  return `${prefix}-${counter.toString(36)}`;
}

/** A random id for tasks and workers. */
export const randomId = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 12);
