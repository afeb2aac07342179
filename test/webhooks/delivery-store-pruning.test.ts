import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { DeliveryQueries } from '../../src/webhooks/delivery-queries.js';
import { DeliveryStore, type ClaimedDelivery, type EndpointRules, type EventToDeliver } from '../../src/webhooks/delivery-store.js';
import { createWebhookTables, WebhookTables } from '../../src/webhooks/webhook-tables.js';

const DAY = 86_400_000;
const OWNER = 'pruning-test';
const RULES: EndpointRules = { circuitFailures: 5, circuitCooldownMs: 30_000, disableAfterMs: 5 * DAY };

/**
 * The delivery store's retention against real Postgres: what the pruner deletes (delivered
 * deliveries past the retention, their attempts, then events no delivery refers to), what it
 * keeps, and that an event re-consumed while the pruner deletes its row still has a body to send.
 */
describe('webhook delivery store: pruning', () => {
  const pool = new pg.Pool({ connectionString: inject('services').databaseUrl, max: 4 });
  const tables = new WebhookTables(`wh_prune_${randomUUID().replaceAll('-', '').slice(0, 8)}`);
  const store = new DeliveryStore(pool, tables);
  const queries = new DeliveryQueries(pool, tables);
  const endpointId = 'ep_prune';

  beforeAll(async () => {
    await createWebhookTables(pool, tables);
    await pool.query(`INSERT INTO ${tables.endpoints} (id, url, event_types, secrets, max_in_flight) VALUES ($1, 'http://127.0.0.1:1/', ARRAY['*'], '[]', 1000)`, [endpointId]);
  });

  beforeEach(async () => {
    await pool.query(`TRUNCATE ${tables.attempts}, ${tables.deliveries}, ${tables.events}, ${tables.eventTypes}`);
  });

  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${tables.schema} CASCADE`);
    await pool.end();
  });

  function event(eventId = randomUUID()): EventToDeliver {
    return { eventId, eventType: 'invoice.paid', aggregateId: 'agg', body: JSON.stringify({ id: eventId }), producedAt: new Date(), endpointIds: [endpointId] };
  }

  /** Records the events at `now`, in one transaction of `client` (default: its own); how many deliveries it added. */
  async function recordDue(events: readonly EventToDeliver[], now: Date, client?: pg.ClientBase): Promise<number> {
    if (client) return store.record(client, events, () => now);
    const own = await pool.connect();
    try {
      await own.query('BEGIN');
      const added = await store.record(own, events, () => now);
      // The store stamps recorded_at with the server's clock: the test's clock instead.
      await own.query(`UPDATE ${tables.events} SET recorded_at = $1 WHERE event_id = ANY($2)`, [now, events.map((e) => e.eventId)]);
      await own.query('COMMIT');
      return added;
    } finally {
      own.release();
    }
  }

  /** Records the events at `now` and leases their deliveries to this test, as a claim would (their first attempt started). */
  async function record(events: readonly EventToDeliver[], now: Date): Promise<readonly ClaimedDelivery[]> {
    await recordDue(events, now);
    const { rows } = await pool.query(
      `UPDATE ${tables.deliveries} SET lease_owner = $1, attempts = 1, next_attempt_at = $2::timestamptz + interval '1 minute' WHERE event_id = ANY($3) RETURNING id::text AS id, event_id, endpoint_id`,
      [OWNER, now, events.map((e) => e.eventId)],
    );
    const byId = new Map(events.map((e) => [e.eventId, e]));
    return rows.map((row) => {
      const { eventType, body, producedAt } = byId.get(row.event_id)!;
      return { id: row.id, eventId: row.event_id, eventType, endpointId: row.endpoint_id, attempt: 1, failures: 0, body, producedAt, url: 'http://127.0.0.1:1/', secrets: [], headers: {} };
    });
  }

  /** Completes the deliveries' first attempts at `now`: delivered, or failed for good. */
  async function finish(deliveries: readonly ClaimedDelivery[], now: Date, status: 'delivered' | 'failed'): Promise<void> {
    await store.write(
      {
        owner: OWNER,
        now,
        events: [],
        owed: [],
        givenBack: [],
        completions: deliveries.map((delivery) => ({
        delivery,
        startedAt: now,
        result: status === 'delivered'
          ? { outcome: 'delivered', statusCode: 204, latencyMs: 3, retryAfterMs: null, response: '', error: null }
          : { outcome: 'http_status', statusCode: 500, latencyMs: 3, retryAfterMs: null, response: 'no', error: 'answered 500' },
        verdict: status === 'delivered'
          ? { delivery: { status: 'delivered' }, endpoint: { kind: 'success' } }
          : { delivery: { status: 'failed', failures: 1 }, endpoint: { kind: 'failure', circuit: false, gone: false, pauseUntil: null } },
        })),
      },
      RULES,
    );
  }

  async function count(table: string): Promise<number> {
    const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
    return rows[0]!.n;
  }

  it('deletes delivered deliveries past the retention with their attempts and events; keeps recent, pending and failed ones', async () => {
    const old = new Date(Date.now() - 10 * DAY);
    const recent = new Date(Date.now() - DAY);
    const oldDelivered = await record([event(), event()], old);
    await finish(oldDelivered, old, 'delivered');
    const oldFailed = await record([event()], old);
    await finish(oldFailed, old, 'failed');
    const recentDelivered = await record([event()], recent);
    await finish(recentDelivered, recent, 'delivered');
    // Still pending: leased, never completed (last: a delivery due holds back the next ones' leases).
    expect(await record([event()], old)).toHaveLength(1);
    expect(await count(tables.attempts)).toBe(4);

    const pruned = await queries.prune(new Date(Date.now() - 7 * DAY));

    expect(pruned).toEqual({ deliveries: 2, events: 2 });
    const { rows } = await pool.query<{ id: string; status: string }>(`SELECT id::text AS id, status FROM ${tables.deliveries} ORDER BY id`);
    expect(rows.map((row) => row.status).sort()).toEqual(['delivered', 'failed', 'pending']);
    expect(rows.map((row) => row.id)).not.toContain(oldDelivered[0]!.id);
    // The pruned deliveries' attempts went with them; the kept ones' stay.
    const { rows: attempts } = await pool.query<{ delivery_id: string }>(`SELECT delivery_id::text AS delivery_id FROM ${tables.attempts} ORDER BY delivery_id`);
    expect(attempts.map((a) => a.delivery_id)).toEqual([oldFailed[0]!.id, recentDelivered[0]!.id]);
    // Every kept delivery still has its event.
    const { rows: orphans } = await pool.query(`SELECT d.id FROM ${tables.deliveries} d WHERE NOT EXISTS (SELECT 1 FROM ${tables.events} ev WHERE ev.event_id = d.event_id)`);
    expect(orphans).toEqual([]);
  });

  it('lists each event type once, with its first event, and keeps it listed once its events are pruned', async () => {
    const old = new Date(Date.now() - 10 * DAY);
    const first = { ...event(), eventType: 'invoice.voided', producedAt: new Date(old.getTime() - 5_000) };
    await finish(await record([first, { ...event(), eventType: 'invoice.voided' }], old), old, 'delivered');
    await recordDue([{ ...event(), producedAt: new Date(old.getTime() + 1_000) }], old);

    const listed = [{ name: 'invoice.paid', firstSeenAt: new Date(old.getTime() + 1_000) }, { name: 'invoice.voided', firstSeenAt: first.producedAt }];
    expect(await queries.seenEventTypes()).toEqual(listed);
    expect(await queries.prune(new Date(Date.now() - 7 * DAY))).toEqual({ deliveries: 2, events: 2 });
    expect(await queries.seenEventTypes()).toEqual(listed);
  });

  it("setup run again on an earlier setup's store lists the event types of its events, and drops the index that listed them", async () => {
    const old = new Date(Date.now() - 10 * DAY);
    await recordDue([{ ...event(), eventType: 'invoice.created', producedAt: old }, { ...event(), eventType: 'invoice.created' }], new Date());
    // As an earlier setup left it: the types read from an index of the events, no table of them.
    await pool.query(`DROP TABLE ${tables.eventTypes}`);
    await pool.query(`CREATE INDEX events_type_idx ON ${tables.events} (event_type, produced_at)`);

    await createWebhookTables(pool, tables);

    expect(await queries.seenEventTypes()).toEqual([{ name: 'invoice.created', firstSeenAt: old }]);
    const { rows } = await pool.query(`SELECT to_regclass($1) AS found`, [`${tables.schema}.events_type_idx`]);
    expect(rows).toEqual([{ found: null }]);
  });

  it('an event consumed again while the pruner deletes its row keeps its row: the new delivery has a body to send', async () => {
    const old = new Date(Date.now() - 10 * DAY);
    // Recorded and delivered long ago; its delivery deleted (the pruner's first step), so its row is the pruner's next.
    const again = event();
    await finish(await record([again], old), old, 'delivered');
    await pool.query(`DELETE FROM ${tables.deliveries}`);

    // Consumed again (a consumer group reset to older offsets); the pruner runs before the consumer commits.
    const consumer = await pool.connect();
    try {
      await consumer.query('BEGIN');
      expect(await recordDue([again], new Date(), consumer)).toBe(1);
      await queries.prune(new Date(Date.now() - 7 * DAY));
      await consumer.query('COMMIT');
    } finally {
      consumer.release();
    }

    const { rows } = await pool.query(`SELECT d.id, ev.body FROM ${tables.deliveries} d LEFT JOIN ${tables.events} ev ON ev.event_id = d.event_id`);
    expect(rows).toEqual([{ id: expect.anything(), body: again.body }]);
  });

  it("an endpoint deleted by hand takes its deliveries and their attempts with it", async () => {
    const gone = 'ep_deleted';
    await pool.query(`INSERT INTO ${tables.endpoints} (id, url, event_types, secrets) VALUES ($1, 'http://127.0.0.1:1/', ARRAY['*'], '[]')`, [gone]);
    const now = new Date();
    const [delivery] = await record([{ ...event(), endpointIds: [gone] }], now);
    await finish([delivery!], now, 'delivered');
    await record([event()], now);

    await pool.query(`DELETE FROM ${tables.endpoints} WHERE id = $1`, [gone]);

    const { rows } = await pool.query<{ endpoint_id: string }>(`SELECT endpoint_id FROM ${tables.deliveries}`);
    expect(rows).toEqual([{ endpoint_id: endpointId }]);
    expect(await count(tables.attempts)).toBe(0);
  });

  it('an endpoint removed while a recording of its deliveries is under way leaves none of them behind', async () => {
    const gone = 'ep_removed_meanwhile';
    await pool.query(`INSERT INTO ${tables.endpoints} (id, url, event_types, secrets) VALUES ($1, 'http://127.0.0.1:1/', ARRAY['*'], '[]')`, [gone]);
    const recording = await pool.connect();
    try {
      await recording.query('BEGIN');
      await store.record(recording, [{ ...event(), endpointIds: [gone, endpointId] }], () => new Date());
      // The removal waits for the recording (it holds the endpoints' removal lock shared)...
      let removed = false;
      const removal = pool.query(`DELETE FROM ${tables.endpoints} WHERE id = $1`, [gone]).then(() => (removed = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(removed).toBe(false);
      await recording.query('COMMIT');
      // ...and then deletes what it wrote.
      await removal;
    } finally {
      recording.release();
    }
    // A recording after the removal no longer finds the endpoint.
    await recordDue([{ ...event(), endpointIds: [gone, endpointId] }], new Date());
    const { rows } = await pool.query<{ endpoint_id: string }>(`SELECT endpoint_id FROM ${tables.deliveries} ORDER BY id`);
    expect(rows).toEqual([{ endpoint_id: endpointId }, { endpoint_id: endpointId }]);
  });

  it('setup run again on tables of an earlier setup drops their foreign keys to events, to endpoints and from attempts', async () => {
    await pool.query(`ALTER TABLE ${tables.deliveries} ADD CONSTRAINT deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES ${tables.events} (event_id)`);
    await pool.query(`ALTER TABLE ${tables.deliveries} ADD CONSTRAINT deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES ${tables.endpoints} (id) ON DELETE CASCADE`);
    await pool.query(`ALTER TABLE ${tables.attempts} ADD CONSTRAINT attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES ${tables.deliveries} (id) ON DELETE CASCADE`);
    await pool.query(`CREATE TABLE ${tables.schema}.endpoint_slots (endpoint_id text)`);

    await createWebhookTables(pool, tables);

    const { rows } = await pool.query<{ name: string }>(
      `SELECT conname AS name FROM pg_constraint WHERE contype = 'f' AND conrelid = ANY($1::regclass[]) ORDER BY conname`,
      [[tables.deliveries, tables.attempts]],
    );
    expect(rows).toEqual([]);
    // The in-flight counters of that setup are gone: each process counts its own (endpoint-shares.ts).
    const { rows: [slots] } = await pool.query(`SELECT to_regclass($1) AS found`, [`${tables.schema}.endpoint_slots`]);
    expect(slots.found).toBeNull();
  });

  it("setup run again on deliveries of an earlier setup adds the columns a first attempt is kept in, and all_attempts, which lists their attempts", async () => {
    // As an earlier setup left them: every attempt a row of attempts, no view.
    await pool.query(`DROP VIEW ${tables.allAttempts}`);
    for (const column of ['started_at', 'latency_ms', 'status_code', 'outcome', 'error', 'response', 'process']) await pool.query(`ALTER TABLE ${tables.deliveries} DROP COLUMN first_${column}`);
    const now = new Date();
    await finish(await record([event()], now), now, 'delivered');

    await createWebhookTables(pool, tables);

    const { rows } = await pool.query<{ attempt: number; outcome: string }>(`SELECT attempt, outcome FROM ${tables.allAttempts}`);
    expect(rows).toEqual([{ attempt: 1, outcome: 'delivered' }]);
    const { rows: columns } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'deliveries' AND column_name LIKE 'first\\_%'`,
      [tables.schema],
    );
    expect(columns[0]!.n).toBe(7);
  });

  it('setup keeps all_attempts readable by the roles that may read attempts, and by no other', async () => {
    const suffix = randomUUID().replaceAll('-', '').slice(0, 8);
    const [reader, other] = [`wh_reader_${suffix}`, `wh_other_${suffix}`];
    try {
      for (const role of [reader, other]) {
        await pool.query(`CREATE ROLE ${role} NOLOGIN`);
        await pool.query(`GRANT USAGE ON SCHEMA ${tables.schema} TO ${role}`);
      }
      // As an operator grants it (the setup job's SQL), before this view existed.
      await pool.query(`GRANT SELECT, INSERT ON ${tables.attempts} TO ${reader}`);

      // Twice: the second run makes the view again, without the first run's grants.
      await createWebhookTables(pool, tables);
      await createWebhookTables(pool, tables);

      const { rows } = await pool.query<{ reader: boolean; other: boolean }>(
        `SELECT has_table_privilege($1, $3, 'SELECT') AS reader, has_table_privilege($2, $3, 'SELECT') AS other`,
        [reader, other, tables.allAttempts],
      );
      expect(rows).toEqual([{ reader: true, other: false }]);
    } finally {
      for (const role of [reader, other]) {
        await pool.query(`DROP OWNED BY ${role}`).catch(() => undefined);
        await pool.query(`DROP ROLE IF EXISTS ${role}`);
      }
    }
  });

  it('setup run again on endpoints of an earlier setup, which had no deliver_from, keeps them owed every event; a new one is owed events from its addition on', async () => {
    // As an earlier setup left them: no column, and the trigger watching event_types only.
    await pool.query(`DROP TRIGGER endpoints_subscriptions_changed ON ${tables.endpoints}`);
    await pool.query(`ALTER TABLE ${tables.endpoints} DROP COLUMN deliver_from`);

    await createWebhookTables(pool, tables);

    await pool.query(`INSERT INTO ${tables.endpoints} (id, url, event_types, secrets) VALUES ('ep_added_after', 'http://127.0.0.1:1/', ARRAY['*'], '[]')`);
    const { rows } = await pool.query<{ id: string; every: boolean; recent: boolean }>(
      `SELECT id, deliver_from = '-infinity' AS every, deliver_from > now() - interval '1 minute' AS recent FROM ${tables.endpoints} ORDER BY id`,
    );
    expect(rows).toEqual([
      { id: 'ep_added_after', every: false, recent: true },
      { id: endpointId, every: true, recent: false },
    ]);
  });
});
