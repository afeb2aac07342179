import { billingEvent, type OutboxRow, type TestOutbox } from './outbox.js';
import { delay } from './relay-process.js';

export interface LoadOptions {
  readonly writers: number;
  readonly rowsPerTransaction: number;
  readonly aggregates: number;
  /** Pause between one writer's transactions. */
  readonly pauseMs: number;
  /** Every n-th transaction of a writer inserts its rows and rolls back (none: 0 or unset). */
  readonly rollbackEvery?: number;
}

/**
 * Writers committing outbox transactions until stopped, riding through database outages
 * (a failed transaction is retried later with new ids). Which rows committed is read back from
 * the table afterwards: that, not this class's counters, is the truth tests compare against.
 */
export class OutboxLoad {
  private running = false;
  private writers: Promise<void>[] = [];
  committedTransactions = 0;
  failedTransactions = 0;
  /** Event ids of rolled-back transactions: none of them may ever reach Kafka. */
  readonly rolledBackIds: string[] = [];
  /** Event ids of transactions whose COMMIT returned: on the table unless the server lost them (asynchronous standby). */
  readonly acknowledgedIds: string[] = [];

  constructor(private readonly outbox: TestOutbox, private readonly options: LoadOptions) {}

  start(): this {
    this.running = true;
    this.writers = Array.from({ length: this.options.writers }, (_, writer) => this.write(writer));
    return this;
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.writers);
  }

  private async write(writer: number): Promise<void> {
    const { rowsPerTransaction, aggregates, pauseMs } = this.options;
    let sequence = 0;
    let transaction = 0;
    while (this.running) {
      transaction += 1;
      const rows = Array.from({ length: rowsPerTransaction }, () => {
        sequence += 1;
        return billingEvent(`inv_${writer}_${sequence % aggregates}`, sequence);
      });
      try {
        const rollbackEvery = this.options.rollbackEvery ?? 0;
        if (rollbackEvery > 0 && transaction % rollbackEvery === 0) await this.insertAndRollBack(rows);
        else {
          await this.outbox.insert(rows);
          this.committedTransactions += 1;
          this.acknowledgedIds.push(...rows.map((row) => row.eventId));
        }
      } catch {
        this.failedTransactions += 1;
        await delay(100);
      }
      if (pauseMs > 0) await delay(pauseMs);
    }
  }

  private async insertAndRollBack(rows: readonly OutboxRow[]): Promise<void> {
    const client = await this.outbox.pool.connect();
    // A server killed between two statements errors the checked-out client itself, not a query,
    // and the pool listens only to idle ones: unheard, that is an uncaught exception in the test
    // run. Heard here, the next statement fails and the transaction counts as failed.
    const brokenConnection = () => undefined;
    client.on('error', brokenConnection);
    let failure: Error | undefined;
    try {
      await client.query('BEGIN');
      await this.outbox.insert(rows, client);
      await client.query('ROLLBACK');
      this.rolledBackIds.push(...rows.map((row) => row.eventId));
    } catch (error) {
      failure = error as Error;
      throw error;
    } finally {
      client.off('error', brokenConnection);
      // A failed client is closed rather than given back to the pool.
      client.release(failure);
    }
  }
}
