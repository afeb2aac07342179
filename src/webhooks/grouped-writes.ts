/**
 * Writes that queue while one is running go together in the next: one write (one Postgres
 * transaction) at a time, each taking what came meanwhile, up to `count`'s bound. The partitions
 * consumed at once then do not queue for the same endpoints' locks, each in a transaction of its
 * own. Each item's promise settles with its own share of the write's result, or its error.
 */
export class GroupedWrites<Item, Result> {
  private queued: { readonly item: Item; readonly resolve: (result: Result) => void; readonly reject: (error: unknown) => void }[] = [];
  private running: Promise<void> | null = null;

  constructor(
    /** Writes a group; resolves with one result per item, in order. */
    private readonly write: (items: readonly Item[]) => Promise<readonly Result[]>,
    /** How many of the queued items (at least the first is always taken) the next write takes. */
    private readonly count: (queued: readonly Item[]) => number = (queued) => queued.length,
  ) {}

  push(item: Item): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queued.push({ item, resolve, reject });
      // Not `??=` on a call that could end at once: the queue is never empty here, so the
      // loop below awaits a write before its `finally` clears `running`.
      if (!this.running) this.running = this.writeQueued();
    });
  }

  private async writeQueued(): Promise<void> {
    try {
      while (this.queued.length > 0) {
        const group = this.queued.splice(0, Math.max(1, this.count(this.queued.map((entry) => entry.item))));
        try {
          const results = await this.write(group.map((entry) => entry.item));
          group.forEach((entry, index) => entry.resolve(results[index]!));
        } catch (error) {
          for (const entry of group) entry.reject(error);
        }
      }
    } finally {
      this.running = null;
    }
  }
}
