import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { databaseAccess } from '../../src/pg-connection.js';
import { setup } from '../../src/setup/setup.js';
import type { KafkaClientName } from '../../src/kafka/ports.js';

export interface OutboxRow {
  readonly eventId: string;
  readonly aggregateType: string;
  readonly aggregateId: string;
  readonly eventType: string;
  readonly payload: unknown;
  readonly headers?: Record<string, string> | null;
}

export interface TestOutboxOptions {
  /** The relay's DATABASE_URL, and setup's (default: the test services' Postgres); may name several hosts. */
  readonly databaseUrl?: string;
  /** Where the test's own SQL goes (inserts, the committed-ids oracle); one host; default databaseUrl. */
  readonly sqlUrl?: string;
  /** OUTBOX_KAFKA_CLIENT of the relays this outbox starts; default the relay's own default. */
  readonly kafkaClient?: KafkaClientName;
}

/** What every test relay runs with: quick status and reconnects, and no metrics port. */
export const TEST_RELAY_TIMINGS = {
  OUTBOX_STATUS_INTERVAL: '200ms',
  OUTBOX_RECONNECT_MIN: '200ms',
  OUTBOX_RECONNECT_MAX: '2s',
  OUTBOX_STANDBY_POLL: '500ms',
  // Many relays run at once in these tests: metrics only where a test asks for a port.
  OUTBOX_HTTP_PORT: '0',
  LOG_LEVEL: 'info',
} as const;

/**
 * One test's own outbox: table, publication, slot and topic prefix named after a random id,
 * so test files never see each other's events.
 */
export class TestOutbox {
  readonly id = `t${randomUUID().replaceAll('-', '').slice(0, 10)}`;
  readonly table = `outbox_${this.id}`;
  readonly slot = `slot_${this.id}`;
  readonly publication = `pub_${this.id}`;
  readonly topicPrefix = `itest-${this.id}`;
  readonly deadLetterTopic = `itest-${this.id}.dead-letter`;
  readonly databaseUrl: string;
  readonly kafkaClient: KafkaClientName | null;
  private sql: pg.Pool;

  constructor(options: TestOutboxOptions = {}) {
    this.databaseUrl = options.databaseUrl ?? inject('services').databaseUrl;
    this.kafkaClient = options.kafkaClient ?? null;
    this.sql = sqlPool(options.sqlUrl ?? this.databaseUrl);
  }

  /** The pool of the test's own SQL. */
  get pool(): pg.Pool {
    return this.sql;
  }

  /** Sends the test's own SQL to another server from now on (a promoted standby). */
  useServer(url: string): void {
    const previous = this.sql;
    this.sql = sqlPool(url);
    // Its server may be gone: the end is not waited for.
    void previous.end().catch(() => undefined);
  }

  /** The relay's environment for this outbox. */
  relayEnv(extra: Record<string, string> = {}): Record<string, string> {
    const services = inject('services');
    return {
      DATABASE_URL: this.databaseUrl,
      KAFKA_BROKERS: services.kafkaBrokers,
      SCHEMA_REGISTRY_URL: services.schemaRegistryUrl,
      OUTBOX_TABLE: `public.${this.table}`,
      OUTBOX_SLOT: this.slot,
      OUTBOX_PUBLICATION: this.publication,
      OUTBOX_TOPIC_TEMPLATE: `${this.topicPrefix}.{aggregate_type}`,
      OUTBOX_DEAD_LETTER_TOPIC: this.deadLetterTopic,
      ...TEST_RELAY_TIMINGS,
      ...(this.kafkaClient && { OUTBOX_KAFKA_CLIENT: this.kafkaClient }),
      ...extra,
    };
  }

  topic(aggregateType: string): string {
    return `${this.topicPrefix}.${aggregateType}`;
  }

  async create(): Promise<void> {
    await setup({ database: databaseAccess(this.databaseUrl), outboxes: [{ table: { schema: 'public', name: this.table } }], publication: this.publication, slot: this.slot });
  }

  /**
   * Inserts rows in one transaction, as given: unlike the writer it checks nothing, so tests can
   * insert what a careless application would (poison rows).
   */
  async insert(rows: readonly OutboxRow[], client?: pg.ClientBase): Promise<void> {
    const target = client ?? this.pool;
    const values: unknown[] = [];
    const tuples = rows.map((row, i) => {
      values.push(row.eventId, row.aggregateType, row.aggregateId, row.eventType, JSON.stringify(row.payload), row.headers ? JSON.stringify(row.headers) : null);
      const base = i * 6;
      return `($${base + 1}, $${base + 2}, $${base + 3}, $${base + 4}, $${base + 5}::jsonb, $${base + 6}::jsonb)`;
    });
    await target.query(
      `INSERT INTO ${this.table} (event_id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ${tuples.join(', ')}`,
      values,
    );
  }

  /** Every event id committed to the outbox: the oracle for "nothing lost". */
  async committedIds(): Promise<string[]> {
    const { rows } = await this.pool.query<{ event_id: string }>(`SELECT event_id FROM ${this.table}`);
    return rows.map((row) => row.event_id);
  }

  async slotState(): Promise<{ confirmed: bigint; active: boolean; activePid: number | null }> {
    const { rows } = await this.pool.query<{ confirmed: string; active: boolean; active_pid: number | null }>(
      `SELECT (confirmed_flush_lsn - '0/0')::text AS confirmed, active, active_pid FROM pg_replication_slots WHERE slot_name = $1`,
      [this.slot],
    );
    const row = rows[0];
    if (!row) throw new Error(`slot ${this.slot} is missing`);
    return { confirmed: BigInt(row.confirmed), active: row.active, activePid: row.active_pid };
  }

  async currentWalLsn(): Promise<bigint> {
    const { rows } = await this.pool.query<{ lsn: string }>(`SELECT (pg_current_wal_lsn() - '0/0')::text AS lsn`);
    return BigInt(rows[0]!.lsn);
  }

  /** Drops the slot (it holds WAL) and the table; call in afterAll. */
  async destroy(): Promise<void> {
    await this.pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [this.slot]).catch(() => undefined);
    await this.pool.query(`DROP PUBLICATION IF EXISTS ${this.publication}`).catch(() => undefined);
    await this.pool.query(`DROP TABLE IF EXISTS ${this.table}`).catch(() => undefined);
    await this.pool.end();
  }
}

function sqlPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 8 });
  // Fault tests restart Postgres under this pool: broken idle clients are dropped, not fatal.
  pool.on('error', () => undefined);
  return pool;
}

export function billingEvent(aggregateId: string, sequence: number, eventType = 'invoice.paid'): OutboxRow {
  return {
    eventId: randomUUID(),
    aggregateType: 'invoice',
    aggregateId,
    eventType,
    payload: { invoice_id: aggregateId, sequence, amount_cents: 1000 + sequence, currency: 'EUR' },
    headers: { traceparent: `00-${randomUUID().replaceAll('-', '')}-${'0'.repeat(15)}1-01` },
  };
}
