import { Partitioners, type Producer } from 'kafkajs';
import pg from 'pg';
import { kafkaClient } from './kafka.js';

export interface PollerOptions {
  readonly databaseUrl: string;
  readonly table: string;
  readonly topic: string;
  /** The poller's own condition of unsent rows, and how it marks a row sent. */
  readonly pending: string;
  readonly markSent: string;
  readonly columns: { readonly eventId: string; readonly aggregateId: string; readonly eventType: string; readonly payload: string };
  readonly batch?: number;
  readonly idleMs?: number;
}

/**
 * A polling relay as the teams moving off one run it: in one transaction, lock the oldest
 * pending rows (FOR UPDATE SKIP LOCKED), publish them (idempotent producer, acks all, key =
 * aggregate id), mark them sent, commit. `sent` keeps every event id it published, in order:
 * what the tests compare the relay's deliveries against.
 */
export class PollingRelay {
  readonly sent: string[] = [];
  private running = false;
  private loop: Promise<void> = Promise.resolve();
  private producer: Producer | null = null;

  constructor(private readonly options: PollerOptions) {}

  async start(): Promise<this> {
    this.producer = kafkaClient().producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: true, maxInFlightRequests: 1 });
    await this.producer.connect();
    this.running = true;
    this.loop = this.poll();
    return this;
  }

  /** Stops after the poll under way commits. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await this.producer?.disconnect();
  }

  private async poll(): Promise<void> {
    const { table, pending, markSent, columns: c, topic, batch = 100, idleMs = 50 } = this.options;
    const client = new pg.Client({ connectionString: this.options.databaseUrl });
    await client.connect();
    try {
      while (this.running) {
        await client.query('BEGIN');
        const { rows } = await client.query<{ id: string; key: string; type: string; payload: string }>(
          `SELECT ${c.eventId}::text AS id, ${c.aggregateId}::text AS key, ${c.eventType} AS type, ${c.payload}::text AS payload
             FROM ${table} WHERE ${pending} ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
          [batch],
        );
        if (rows.length > 0) {
          await this.producer!.send({ topic, acks: -1, messages: rows.map((row) => ({ key: row.key, value: row.payload, headers: { event_id: row.id, event_type: row.type } })) });
          // Published: the poller's for the tests, whether or not its mark-sent commits.
          this.sent.push(...rows.map((row) => row.id));
          await client.query(`UPDATE ${table} SET ${markSent} WHERE ${c.eventId}::text = ANY ($1::text[])`, [rows.map((row) => row.id)]);
        }
        await client.query('COMMIT');
        if (rows.length < batch) await new Promise((resolve) => setTimeout(resolve, idleMs));
      }
    } finally {
      await client.end();
    }
  }
}
