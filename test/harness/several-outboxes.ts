import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createTopics } from './kafka.js';
import { TEST_RELAY_TIMINGS } from './outbox.js';
import { delay } from './relay-process.js';

/** How an event reaches the relay: a row of one of the three tables, or a message. */
export type Carrier = 'a' | 'b' | 'c' | 'message';

/** The events of one transaction, by carrier, in the order the transaction writes them. */
export const TRANSACTION_SHAPE: readonly Carrier[] = ['a', 'message', 'b', 'message', 'c'];

/**
 * Three outbox tables and a message outbox streamed through one slot, as a modular monolith has
 * them: `a` is the default table, `b` a table of its own column names, `c` routed by {table} to a
 * topic of its own; messages with the prefix `outbox_<id>`. Every event id a committed
 * transaction wrote, whatever carried it, is recorded in `committed_<id>` in that transaction:
 * the oracle for "nothing lost" (a message leaves no row of its own).
 */
export class SeveralOutboxes {
  readonly id = `m${randomUUID().replaceAll('-', '').slice(0, 10)}`;
  readonly tables = { a: `outbox_${this.id}_a`, b: `outbox_${this.id}_b`, c: `outbox_${this.id}_c` };
  readonly prefix = `outbox_${this.id}`;
  readonly slot = `slot_${this.id}`;
  readonly publication = `pub_${this.id}`;
  readonly topicPrefix = `itest-${this.id}`;
  readonly sharedTopic = `${this.topicPrefix}.invoice`;
  readonly tableCTopic = `${this.topicPrefix}.${this.tables.c}`;
  readonly deadLetterTopic = `${this.topicPrefix}.dead-letter`;
  readonly pool = new pg.Pool({ connectionString: inject('services').databaseUrl, max: 8 });
  private readonly oracle = `committed_${this.id}`;

  /** OUTBOX_SOURCES of this set: the JSON an operator would write. */
  get sources(): string {
    return JSON.stringify([
      { table: `public.${this.tables.a}` },
      { table: `public.${this.tables.b}`, columns: { eventId: 'id', aggregateType: 'kind', aggregateId: 'aggregate', eventType: 'type', payload: 'body', headers: 'meta', createdAt: 'at' } },
      { table: `public.${this.tables.c}`, topicTemplate: `${this.topicPrefix}.{table}` },
      { messages: this.prefix },
    ]);
  }

  relayEnv(extra: Record<string, string> = {}): Record<string, string> {
    const services = inject('services');
    return {
      DATABASE_URL: services.databaseUrl,
      KAFKA_BROKERS: services.kafkaBrokers,
      OUTBOX_SOURCES: this.sources,
      OUTBOX_SLOT: this.slot,
      OUTBOX_PUBLICATION: this.publication,
      OUTBOX_TOPIC_TEMPLATE: `${this.topicPrefix}.{aggregate_type}`,
      OUTBOX_DEAD_LETTER_TOPIC: this.deadLetterTopic,
      ...TEST_RELAY_TIMINGS,
      ...extra,
    };
  }

  /** Table `b` by hand (its own column names; setup makes only the default shape), the oracle, and the topics. */
  async create(): Promise<void> {
    await this.pool.query(`CREATE TABLE ${this.tables.b} (id uuid PRIMARY KEY, kind text NOT NULL, aggregate text NOT NULL, type text NOT NULL, body jsonb NOT NULL, meta jsonb, at timestamptz NOT NULL DEFAULT now())`);
    await this.pool.query(`CREATE TABLE ${this.oracle} (event_id uuid PRIMARY KEY, carrier text NOT NULL)`);
    await createTopics([this.sharedTopic, this.tableCTopic, this.deadLetterTopic]);
  }

  /**
   * One transaction of `aggregate`: an event per carrier of TRANSACTION_SHAPE, with the next
   * sequences of that aggregate (the caller owns the aggregate: its transactions commit in
   * sequence order). Rolled back instead of committed when `rollback`.
   */
  async transaction(client: pg.ClientBase, aggregate: string, firstSequence: number, rollback = false): Promise<readonly string[]> {
    const ids: string[] = [];
    await client.query('BEGIN');
    try {
      for (const [index, carrier] of TRANSACTION_SHAPE.entries()) {
        const id = randomUUID();
        ids.push(id);
        await this.write(client, carrier, id, aggregate, firstSequence + index);
        await client.query(`INSERT INTO ${this.oracle} (event_id, carrier) VALUES ($1, $2)`, [id, carrier]);
      }
      await client.query(rollback ? 'ROLLBACK' : 'COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
    return ids;
  }

  private async write(client: pg.ClientBase, carrier: Carrier, id: string, aggregate: string, sequence: number): Promise<void> {
    const payload = JSON.stringify({ invoice_id: aggregate, sequence, amount_cents: 1000 + sequence });
    if (carrier === 'message') {
      const content = JSON.stringify({ event_id: id, aggregate_type: 'invoice', aggregate_id: aggregate, event_type: 'invoice.paid', payload: JSON.parse(payload) as unknown, headers: { carrier } });
      await client.query('SELECT pg_logical_emit_message(true, $1, $2)', [this.prefix, content]);
    } else if (carrier === 'b') {
      await client.query(`INSERT INTO ${this.tables.b} (id, kind, aggregate, type, body, meta) VALUES ($1, 'invoice', $2, 'invoice.paid', $3, $4)`, [id, aggregate, payload, JSON.stringify({ carrier })]);
    } else {
      await client.query(`INSERT INTO ${this.tables[carrier]} (event_id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, 'invoice', $2, 'invoice.paid', $3, $4)`, [id, aggregate, payload, JSON.stringify({ carrier })]);
    }
  }

  /** Writers, each owning its aggregates, until stopped; every tenth transaction rolled back. */
  load(writers = 3, aggregatesPerWriter = 4): { stop: () => Promise<void>; readonly rolledBack: string[] } {
    let running = true;
    const rolledBack: string[] = [];
    const loops = Array.from({ length: writers }, async (_, writer) => {
      const client = await this.pool.connect();
      const sequences = new Map<string, number>();
      try {
        for (let round = 0; running; round += 1) {
          const aggregate = `inv-${writer}-${round % aggregatesPerWriter}`;
          const first = (sequences.get(aggregate) ?? 0) + 1;
          const rollback = round % 10 === 9;
          const ids = await this.transaction(client, aggregate, first, rollback);
          if (rollback) rolledBack.push(...ids);
          else sequences.set(aggregate, first + ids.length - 1);
          await delay(5);
        }
      } finally {
        client.release();
      }
    });
    return { stop: async () => void ((running = false), await Promise.all(loops)), rolledBack };
  }

  /** Every event id a committed transaction wrote, by carrier. */
  async committed(): Promise<Map<string, Carrier>> {
    const { rows } = await this.pool.query<{ event_id: string; carrier: Carrier }>(`SELECT event_id, carrier FROM ${this.oracle}`);
    return new Map(rows.map((row) => [row.event_id, row.carrier]));
  }

  async emit(prefix: string, content: string, transactional = true): Promise<void> {
    await this.pool.query('SELECT pg_logical_emit_message($1, $2, $3)', [transactional, prefix, content]);
  }

  async destroy(): Promise<void> {
    await this.pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [this.slot]).catch(() => undefined);
    await this.pool.query(`DROP PUBLICATION IF EXISTS ${this.publication}`).catch(() => undefined);
    for (const table of [...Object.values(this.tables), this.oracle]) await this.pool.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
    await this.pool.end();
  }
}
