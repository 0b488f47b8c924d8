import fs from 'node:fs';

/**
 * Watches a running hub's state directory. If it is deleted, moved away or replaced by another
 * directory (`rm -rf .swarm` while the swarm runs, then maybe a new `swarm up` there), `onGone` is
 * called once. The hub cannot keep its promises then: its journal is an unlinked file that no
 * restart will read, and no CLI can find it to stop it (hub.json and the pid files are gone), so its
 * workers would run on as orphans. Stopping is the honest answer.
 */
export class StateDirGuard {
  private timer?: NodeJS.Timeout;
  private readonly id: { dev: number; ino: number };
  private fired = false;

  constructor(private readonly dir: string, private readonly onGone: (reason: string) => void, private readonly everyMs = 2000) {
    const s = fs.statSync(dir);
    this.id = { dev: s.dev, ino: s.ino };
  }

  start(): void {
    this.timer ??= setInterval(() => this.check(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Why the directory is no longer this hub's, or undefined while it is. */
  problem(): string | undefined {
    let s: fs.Stats;
    try { s = fs.statSync(this.dir); } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Only a directory that is not there counts: EACCES or EIO say nothing about who owns it.
      return code === 'ENOENT' || code === 'ENOTDIR' ? `state directory ${this.dir} was removed` : undefined;
    }
    if (s.dev !== this.id.dev || s.ino !== this.id.ino) return `state directory ${this.dir} was replaced by another directory`;
    return undefined;
  }

  private check(): void {
    if (this.fired) return;
    const why = this.problem();
    if (why === undefined) return;
    this.fired = true;
    this.stop();
    this.onGone(why);
  }
}
