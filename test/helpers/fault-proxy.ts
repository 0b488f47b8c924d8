import net from 'node:net';

interface Link { client: net.Socket; upstream: net.Socket; target: string; dialer?: string; down: number }

/**
 * A loopback fault proxy for the gossip peer ports. Each worker's port is wrapped (`wrap`), and the
 * worker advertises the proxy's address. The proxy reads the dialer's advertised address from the
 * transport's hello frame, so `cut(addr)` can sever both directions of one worker: connections to
 * it and connections it opened, now and until `restore(addr)`. Cut traffic is blackholed (the
 * socket stays open, bytes vanish), as a partition looks to TCP. It also counts the bytes each
 * proxy passes back to its dialers (`down`) and can close a proxied link outright (`severAfter`).
 */
export class FaultNet {
  private readonly servers: net.Server[] = [];
  private readonly links = new Set<Link>();
  private readonly cutSet = new Set<string>();
  /** Bytes passed to dialers, per proxy address, over every link it ever carried. */
  private readonly downBytes = new Map<string, number>();
  /** Per proxy address: close a link once it has passed this many bytes to its dialer. */
  private readonly severAt = new Map<string, number>();
  /** Per proxy address: stop reading from the target once a link has passed this many bytes (a holder that stops draining). */
  private readonly pauseAt = new Map<string, number>();
  private readonly paused = new Set<Link>();

  /** Put a proxy in front of `target` ("127.0.0.1:port"); resolves with the proxy's address. */
  async wrap(target: string): Promise<string> {
    const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
    let self = '';
    const server = net.createServer((client) => {
      const upstream = net.connect({ host, port });
      const link: Link = { client, upstream, target: self, down: 0 };
      this.links.add(link);
      let head: Buffer = Buffer.alloc(0);
      client.on('data', (c: Buffer) => {
        if (link.dialer === undefined) {
          head = Buffer.concat([head, c]);
          const m = /(127\.0\.0\.1:\d+)/.exec(head.toString('latin1'));
          if (m) link.dialer = m[1];
          else if (head.length < 4096) return;
          else link.dialer = '?';
          c = head;
        }
        if (!this.blocked(link)) upstream.write(c);
      });
      upstream.on('data', (c: Buffer) => {
        if (this.blocked(link)) return;
        client.write(c);
        link.down += c.length;
        this.downBytes.set(self, (this.downBytes.get(self) ?? 0) + c.length);
        const at = this.severAt.get(self);
        if (at !== undefined && link.down >= at) { this.severAt.delete(self); client.destroy(); upstream.destroy(); }
        const stall = this.pauseAt.get(self);
        if (stall !== undefined && link.down >= stall) { this.pauseAt.delete(self); upstream.pause(); this.paused.add(link); }
      });
      const end = () => { client.destroy(); upstream.destroy(); this.links.delete(link); };
      client.on('error', end); upstream.on('error', end);
      client.on('close', end); upstream.on('close', end);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    this.servers.push(server);
    self = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    return self;
  }

  /** Bytes the proxy at `proxy` has passed to its dialers so far, over all its links. */
  down(proxy: string): number { return this.downBytes.get(proxy) ?? 0; }

  /** Close the next link through `proxy` (both sockets) once it has passed `bytes` to its dialer: a cut connection. */
  severAfter(proxy: string, bytes: number): void { this.severAt.set(proxy, bytes); }

  /**
   * Stop reading from the target on the next link through `proxy` once it has passed `bytes` to its
   * dialer, until `unpause`: the sender's socket fills as it would toward a holder that stopped reading.
   */
  pauseAfter(proxy: string, bytes: number): void { this.pauseAt.set(proxy, bytes); }
  unpause(): void { for (const l of this.paused) l.upstream.resume(); this.paused.clear(); }
  isPaused(): boolean { return this.paused.size > 0; }

  /** Sever the worker advertising `addr` from everyone, both directions. */
  cut(addr: string): void { this.cutSet.add(addr); }
  restore(addr: string): void { this.cutSet.delete(addr); }

  async close(): Promise<void> {
    for (const l of this.links) { l.client.destroy(); l.upstream.destroy(); }
    await Promise.all(this.servers.map((s) => new Promise((r) => s.close(r))));
  }

  private blocked(l: Link): boolean {
    return this.cutSet.has(l.target) || (l.dialer !== undefined && this.cutSet.has(l.dialer));
  }
}
