import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { createTopics, TopicReader, type ConsumedRecord } from '../harness/kafka.js';
import { TestOutbox } from '../harness/outbox.js';
import { PollingRelay } from '../harness/poller.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * Moving off a polling relay loses nothing: `cutover` runs while the poller still publishes and
 * writers commit (some rolling back), the relay takes over, the poller stops; `cutover` killed
 * half way through a large backlog and run again; and the way back (`handback`), after which a
 * restarted poller sends exactly what the relay had not confirmed. The table is the common
 * polling outbox (uuid ids, a status column, a partial index on pending rows, no aggregate type).
 */
const PENDING = "status = 'pending'";
const MARK_SENT = "status = 'sent', sent_at = now()";

function pollingTable(table: string): string {
  return `
    CREATE TABLE ${table} (outbox_id uuid PRIMARY KEY DEFAULT gen_random_uuid(), event_id uuid NOT NULL UNIQUE, aggregate_id text NOT NULL, event_type text NOT NULL,
      payload jsonb NOT NULL, status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now(), sent_at timestamptz);
    CREATE INDEX ${table}_pending_idx ON ${table} (created_at) WHERE status = 'pending'`;
}

/** One polling outbox per describe: its table and topic (made before its tests, removed after), the relay's environment for it. */
function pollingOutbox(): { outbox: TestOutbox; env: Record<string, string>; topic: string; poller: () => PollingRelay } {
  const outbox = new TestOutbox();
  const topic = `${outbox.topicPrefix}.invoice.paid`;
  const env = outbox.relayEnv({ OUTBOX_TOPIC_TEMPLATE: `${outbox.topicPrefix}.{event_type}`, OUTBOX_COLUMN_AGGREGATE_TYPE: '' });
  beforeAll(async () => {
    await outbox.pool.query(pollingTable(outbox.table));
    await createTopics([topic]);
  });
  afterAll(() => outbox.destroy());
  const poller = () =>
    new PollingRelay({
      databaseUrl: outbox.databaseUrl,
      table: outbox.table,
      topic,
      pending: PENDING,
      markSent: MARK_SENT,
      columns: { eventId: 'event_id', aggregateId: 'aggregate_id', eventType: 'event_type', payload: 'payload' },
    });
  return { outbox, env, topic, poller };
}

/**
 * Writers as the application runs them: each commits one event per transaction for its own
 * aggregates, sequence numbers rising per aggregate; every `rollbackEvery`-th transaction
 * inserts and rolls back.
 */
class Writers {
  readonly rolledBack: string[] = [];
  private running = true;
  private readonly done: Promise<void>[];

  constructor(outbox: TestOutbox, count: number, rollbackEvery: number) {
    this.done = Array.from({ length: count }, (_, writer) => this.write(outbox, writer, rollbackEvery));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.done);
  }

  private async write(outbox: TestOutbox, writer: number, rollbackEvery: number): Promise<void> {
    const client = new pg.Client({ connectionString: outbox.databaseUrl });
    await client.connect();
    try {
      for (let sequence = 1; this.running; sequence += 1) {
        const eventId = randomUUID();
        await client.query('BEGIN');
        await client.query(`INSERT INTO ${outbox.table} (event_id, aggregate_id, event_type, payload) VALUES ($1, $2, 'invoice.paid', $3)`, [eventId, `inv_${writer}_${sequence % 4}`, JSON.stringify({ writer, sequence })]);
        if (sequence % rollbackEvery === 0) {
          await client.query('ROLLBACK');
          this.rolledBack.push(eventId);
        } else {
          await client.query('COMMIT');
        }
        await delay(5);
      }
    } finally {
      await client.end();
    }
  }
}

async function committedIds(outbox: TestOutbox): Promise<string[]> {
  return (await outbox.pool.query<{ id: string }>(`SELECT event_id::text AS id FROM ${outbox.table}`)).rows.map((row) => row.id);
}

function countsById(records: readonly ConsumedRecord[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const record of records) counts.set(record.headers.event_id!, (counts.get(record.headers.event_id!) ?? 0) + 1);
  return counts;
}

describe('cutover while the polling relay still runs, under load', () => {
  const { outbox, env, topic, poller: newPoller } = pollingOutbox();

  it('every committed row arrives, no rolled-back one; duplicates only of rows both sent; order per aggregate for what the relay alone sent', async () => {
    const poller = await newPoller().start();
    const writers = new Writers(outbox, 4, 7);
    let relay: RelayProcess | null = null;
    try {
      // The poller works a while alone: some rows sent, some pending, more arriving.
      await eventually('the poller to send 200 rows', async () => (poller.sent.length >= 200 ? true : undefined), 60_000);
      const cutover = await cli(['cutover', '--pending', PENDING], env);
      expect(cutover.code, cutover.stderr).toBe(0);
      relay = new RelayProcess(env).start();
      await relay.waitActive();
      await delay(2_000);
      await poller.stop();
      await delay(2_000);
    } finally {
      await writers.stop();
      await poller.stop();
    }
    try {
      const committed = await committedIds(outbox);
      const reader = await new TopicReader().start([topic]);
      try {
        await reader.until(`all ${committed.length} committed rows`, (records) => new Set(records.map((r) => r.headers.event_id)).size >= committed.length, 120_000, () => relay!.tail());
        await delay(1_000);
        const counts = countsById(reader.records);
        const missing = committed.filter((id) => !counts.has(id));
        const sentByPoller = new Set(poller.sent);
        const duplicates = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
        const duplicatesNotFromOverlap = duplicates.filter((id) => !sentByPoller.has(id));
        console.log(`cutover beside the poller: committed ${committed.length}, missing ${missing.length}, rolled back ${writers.rolledBack.length} (arrived: ${writers.rolledBack.filter((id) => counts.has(id)).length}), poller sent ${sentByPoller.size}, duplicates ${duplicates.length} (all of them rows the poller also sent: ${duplicatesNotFromOverlap.length === 0})`);
        expect(missing).toEqual([]);
        expect(writers.rolledBack.filter((id) => counts.has(id))).toEqual([]);
        expect(new Set(counts.keys())).toEqual(new Set(committed));
        expect(duplicatesNotFromOverlap).toEqual([]);
        // What the relay alone published (cutover's rows, then the stream) is in commit order per aggregate.
        const lastSequence = new Map<string, number>();
        for (const record of reader.records.filter((r) => !sentByPoller.has(r.headers.event_id!))) {
          const { sequence } = JSON.parse(record.value!.toString('utf8')) as { sequence: number };
          expect(sequence, `aggregate ${record.key}`).toBeGreaterThan(lastSequence.get(record.key!) ?? 0);
          lastSequence.set(record.key!, sequence);
        }
      } finally {
        await reader.stop();
      }
    } finally {
      expect(await relay?.stop()).toBe(0);
    }
  });
});

describe('cutover killed (-9) while publishing a large backlog, then run again', () => {
  const { outbox, env, topic } = pollingOutbox();
  const ROWS = 100_000;
  beforeAll(async () => {
    await outbox.pool.query(
      `INSERT INTO ${outbox.table} (event_id, aggregate_id, event_type, payload)
         SELECT gen_random_uuid(), 'inv_' || (g % 500), 'invoice.paid', jsonb_build_object('sequence', g, 'amount_cents', 1000 + g, 'currency', 'EUR') FROM generate_series(1, ${ROWS}) g`,
    );
  });

  it('nothing is lost: run waits for the unfinished cutover, the second one starts over from a new snapshot', async () => {
    const first = new RelayProcess(env, ['--pending', PENDING], 'cutover').start();
    await first.waitForLog(/^cutover: progress$/, 60_000);
    await eventually('cutover to publish 20,000 rows', async () => (first.logs.some((line) => line.msg === 'cutover: progress' && Number(line.published) >= 20_000) ? true : undefined), 60_000);
    await first.kill9();
    const published = Math.max(...first.logs.filter((line) => line.msg === 'cutover: progress').map((line) => Number(line.published)));
    expect(published).toBeLessThan(ROWS);

    const run = await cli(['run'], env, 60_000);
    expect(run.code).toBe(1);
    expect(run.stdout + run.stderr).toMatch(/SOURCE_RECOVERY_UNFINISHED.*outbox-relay cutover` again with the same --pending/);

    const second = await cli(['cutover', '--pending', PENDING], env, 300_000);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/an earlier cutover did not finish/);
    expect(second.stdout).toContain(`published: ${ROWS} rows matching ${PENDING}`);

    const relay = new RelayProcess(env).start();
    try {
      await relay.waitActive();
      await outbox.pool.query(`INSERT INTO ${outbox.table} (event_id, aggregate_id, event_type, payload) VALUES (gen_random_uuid(), 'inv_after', 'invoice.paid', '{"sequence": 0}')`);
      const committed = await committedIds(outbox);
      const reader = await new TopicReader().start([topic]);
      try {
        await reader.until(`all ${committed.length} rows`, (records) => new Set(records.map((r) => r.headers.event_id)).size >= committed.length, 180_000, () => relay.tail());
        const counts = countsById(reader.records);
        const missing = committed.filter((id) => !counts.has(id));
        console.log(`cutover killed: ${ROWS} pending rows, 1 kill after ${published} published, missing ${missing.length}, records ${reader.records.length} (${reader.records.length - committed.length} sent twice)`);
        expect(missing).toEqual([]);
        expect(new Set(counts.keys())).toEqual(new Set(committed));
      } finally {
        await reader.stop();
      }
    } finally {
      expect(await relay.stop()).toBe(0);
    }
  });
});

describe('the way back to polling: handback', () => {
  const { outbox, env, topic, poller: newPoller } = pollingOutbox();

  async function insert(count: number, client: pg.ClientBase | pg.Pool = outbox.pool): Promise<string[]> {
    const ids = Array.from({ length: count }, () => randomUUID());
    for (const id of ids) await client.query(`INSERT INTO ${outbox.table} (event_id, aggregate_id, event_type, payload) VALUES ($1, 'inv_1', 'invoice.paid', '{}')`, [id]);
    return ids;
  }

  it('a restarted poller sends none of the rows the relay confirmed and every row it had not', async () => {
    // One handover at a time per slot: a second one would drop the first one's slot.
    const holder = await outbox.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(hashtext($1))', [`outbox-relay handover ${outbox.slot}`]);
      const busy = await cli(['cutover', '--pending', PENDING], env);
      expect(busy.code).toBe(1);
      expect(busy.stderr).toMatch(/\[SOURCE_HANDOVER_BUSY\]: cannot cutover with slot "\S+": .* is already running recover, cutover or handback on it/);
    } finally {
      await holder.query('SELECT pg_advisory_unlock_all()');
    }
    // And one per table: the key a relay of an earlier version (one table, no slot key) takes,
    // and another slot's relay over the same table, would clear this one's marks.
    try {
      await holder.query('SELECT pg_advisory_lock(hashtext($1))', [`outbox-relay handover public.${outbox.table}`]);
      const busy = await cli(['cutover', '--pending', PENDING], env);
      expect(busy.code).toBe(1);
      expect(busy.stderr).toContain(`is already running recover, cutover or handback on public.${outbox.table} (through another slot, or a relay of an earlier version)`);
    } finally {
      await holder.query('SELECT pg_advisory_unlock_all()');
      holder.release();
    }
    const cutover = await cli(['cutover', '--pending', PENDING], env);
    expect(cutover.code, cutover.stderr).toBe(0);
    const relay = new RelayProcess(env).start();
    let confirmed: string[];
    try {
      await relay.waitActive();
      confirmed = await insert(20);
      const reader = await new TopicReader().start([topic]);
      try {
        await reader.until('the relay to publish them', (records) => confirmed.every((id) => records.some((r) => r.headers.event_id === id)), 30_000, () => relay.tail());
      } finally {
        await reader.stop();
      }
      const refused = await cli(['handback', '--pending', PENDING, '--mark-sent', MARK_SENT], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/\[SOURCE_SLOT_BUSY\]: replication slot "\S+" is in use .*stop every relay first/);
    } finally {
      // SIGTERM: the relay confirms everything Kafka acknowledged before it exits.
      expect(await relay.stop()).toBe(0);
    }
    // Committed with no relay running: after the slot's confirmed position.
    const unconfirmed = await insert(7);
    const client = await outbox.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SAVEPOINT inner_work');
      unconfirmed.push(...(await insert(3, client)));
      await client.query('RELEASE SAVEPOINT inner_work');
      await client.query('COMMIT');
    } finally {
      client.release();
    }

    const leaves = await cli(['handback', '--pending', PENDING, '--mark-sent', 'attempts = attempts + 1'], env);
    expect(leaves.code).toBe(1);
    expect(leaves.stderr).toMatch(/\[CUTOVER_CONDITION\]: --mark-sent "attempts = attempts \+ 1" leaves 20 of the rows it marked matching --pending .*nothing was changed/);
    const dry = await cli(['handback', '--pending', PENDING, '--mark-sent', MARK_SENT, '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('would mark sent: 20 pending rows the relay confirmed; left pending: 10 rows');
    const handback = await cli(['handback', '--pending', PENDING, '--mark-sent', MARK_SENT], env);
    expect(handback.code, handback.stderr).toBe(0);
    expect(handback.stdout).toContain('marked sent: 20 pending rows the relay confirmed; left pending: 10 rows');
    expect((await outbox.pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot])).rows).toHaveLength(0);

    const poller = await newPoller().start();
    try {
      await eventually('the poller to send the rows the relay had not confirmed', async () => (poller.sent.length >= unconfirmed.length ? true : undefined), 30_000);
      await delay(500);
    } finally {
      await poller.stop();
    }
    expect(poller.sent.sort()).toEqual([...unconfirmed].sort());
    expect(poller.sent.filter((id) => confirmed.includes(id))).toEqual([]);
  });
});
