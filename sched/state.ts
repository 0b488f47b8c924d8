/** A task's scheduling state. The same four for the hub's queue and a gossip replica. */
export const TaskState = { QUEUED: 'queued', LEASED: 'leased', DONE: 'done', FAILED: 'failed' } as const;
export type TaskState = (typeof TaskState)[keyof typeof TaskState];

/**
 * Every allowed move. A result may finish a task that is not leased here (it was run elsewhere: in
 * gossip mode, or under an expired lease) and a queued task may fail without running (cancelled,
 * released too often); nothing leaves a final state.
 */
export const TRANSITIONS: Readonly<Record<TaskState, readonly TaskState[]>> = {
  queued: ['leased', 'done', 'failed'],
  leased: ['queued', 'done', 'failed'],
  done: [],
  failed: [],
};

/** True once a task in this state will not change again. */
export function isFinalState(s: TaskState): boolean { return s === TaskState.DONE || s === TaskState.FAILED; }

/** May a task move from `from` to `to`? */
export function canMove(from: TaskState, to: TaskState): boolean { return TRANSITIONS[from].includes(to); }
