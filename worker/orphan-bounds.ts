/**
 * The orphan bound's default and largest value, defined once: the worker config's schema holds a
 * worker to them, and the CLI refuses a value past them before it starts a supervised worker that
 * would fail on it (and be respawned). No imports: the CLI reads it at start.
 */
export const ORPHAN_EXIT_DEFAULT_MS = 10 * 60_000;
export const ORPHAN_EXIT_MAX_MS = 30 * 24 * 3600_000;
