import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of a service, for the failure real networks have: a
 * connection that goes silent without closing (a dropped NAT or conntrack entry, a load balancer
 * failover). `silence()` stops every connection open at that moment from moving a byte in
 * either direction, and hides from the client that the server side closed; connections made
 * afterwards work normally, as they would through a fresh network path.
 */
export class SilentProxy {
  private readonly server: Server;
  private readonly pairs = new Set<{ client: Socket; upstream: Socket; silent: boolean }>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = createServer((client) => this.accept(client));
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  /** Silences every connection open now; returns how many. */
  silence(): number {
    let count = 0;
    for (const pair of this.pairs) {
      if (pair.silent) continue;
      pair.silent = true;
      count += 1;
      pair.client.unpipe();
      pair.upstream.unpipe();
      // Reads stop: nothing more is taken from either side, as if the packets were dropped.
      pair.client.pause();
      pair.upstream.pause();
    }
    return count;
  }

  async stop(): Promise<void> {
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const upstream = createConnection(this.target);
    const pair = { client, upstream, silent: false };
    this.pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => {
      // A silenced connection stays open on the client's side whatever the server does.
      if (pair.silent) return;
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  }
}
