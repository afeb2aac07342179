import type pg from 'pg';
import type { EventToDeliver } from './lifecycle.js';
import { prepared } from './prepared.js';
import type { WebhookTables } from './webhook-tables.js';

/** An event whose customer was not found, with what the rule reads, for a replay once it can be. */
export interface EventWithoutCustomer extends Omit<EventToDeliver, 'endpointIds'> {
  readonly headers: Readonly<Record<string, string>>;
  /** What the rule found missing. */
  readonly reason: string;
}

/** The events whose customer was not found, as the intake records them (listed and replayed by without-customer.ts). */
export class WithoutCustomerStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly tables: WebhookTables,
  ) {}

  /** Recorded before their offsets can be committed (WebhookIntake.recordWithoutCustomer); one read again adds nothing. */
  async record(events: readonly EventWithoutCustomer[]): Promise<void> {
    await this.pool.query(
      prepared(`INSERT INTO ${this.tables.eventsWithoutCustomer} (event_id, event_type, aggregate_id, body, headers, produced_at, reason)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::timestamptz[], $7::text[])
         ON CONFLICT (event_id) DO NOTHING`,
      [events.map((e) => e.eventId), events.map((e) => e.eventType), events.map((e) => e.aggregateId), events.map((e) => e.body), events.map((e) => JSON.stringify(e.headers)), events.map((e) => e.producedAt), events.map((e) => e.reason)]),
    );
  }
}
