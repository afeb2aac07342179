import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { createTopics, TopicReader } from '../harness/kafka.js';
import { billingEvent, TestOutbox } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

/** An outbox partitioned by time, so that old rows go by dropping a partition. */
async function createPartitioned(outbox: TestOutbox): Promise<void> {
  await outbox.pool.query(`
      CREATE TABLE ${outbox.table} (
        event_id text NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
        payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (event_id, created_at)
      ) PARTITION BY RANGE (created_at)`);
  await outbox.pool.query(`CREATE TABLE ${outbox.table}_past PARTITION OF ${outbox.table} FOR VALUES FROM (MINVALUE) TO ('2026-01-01')`);
  await outbox.pool.query(`CREATE TABLE ${outbox.table}_now PARTITION OF ${outbox.table} FOR VALUES FROM ('2026-01-01') TO (MAXVALUE)`);
  await createTopics([outbox.topic('invoice')]);
}

/** An outbox partitioned by aggregate type: rows of two partitions can sit at the same ctids. */
async function createListPartitioned(outbox: TestOutbox): Promise<void> {
    await outbox.pool.query(`
      CREATE TABLE ${outbox.table} (
        event_id text NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
        payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now()
      ) PARTITION BY LIST (aggregate_type)`);
    await outbox.pool.query(`CREATE TABLE ${outbox.table}_invoice PARTITION OF ${outbox.table} FOR VALUES IN ('invoice')`);
    await outbox.pool.query(`CREATE TABLE ${outbox.table}_refund PARTITION OF ${outbox.table} FOR VALUES IN ('refund')`);
    await createTopics([outbox.topic('invoice'), outbox.topic('refund')]);
}

/** Its inserts must reach the relay as the outbox's own, not as each partition's. */
describe('a partitioned outbox table', () => {
  const outbox = new TestOutbox();

  beforeAll(() => createPartitioned(outbox));
  afterAll(() => outbox.destroy());

  it('setup publishes it through its root, the relay delivers inserts into any partition, and a publication without the root is refused', async () => {
    const setup = await cli(['setup'], outbox.relayEnv());
    expect(setup.code, setup.stderr).toBe(0);
    expect(setup.stdout).toMatch(/publication .*: created \(inserts into .*, published as the partitioned table\)/);

    const reader = await new TopicReader().start([outbox.topic('invoice')]);
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      const current = billingEvent('inv_p', 1);
      await outbox.insert([current]);
      await outbox.pool.query(
        `INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload, created_at) VALUES ('evt_past', 'invoice', 'inv_p', 'invoice.paid', '{}', '2025-06-01')`,
      );
      await reader.until('both events', (records) => ['evt_past', current.eventId].every((id) => records.some((record) => record.headers.event_id === id)), 30_000, () => relay.tail());
      expect(relay.logs.some((line) => /ignoring a change/.test(line.msg))).toBe(false);
    } finally {
      await relay.stop();
      await reader.stop();
    }

    await outbox.pool.query(`DROP PUBLICATION ${outbox.publication}`);
    await outbox.pool.query(`CREATE PUBLICATION ${outbox.publication} FOR TABLE ${outbox.table} WITH (publish = 'insert')`);
    const refused = await cli(['setup'], outbox.relayEnv());
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/is partitioned and the publication sends inserts under each partition's name/);
    expect(refused.stderr).toMatch(/Expected: CREATE PUBLICATION .* WITH \(publish = 'insert', publish_via_partition_root = true\)/);
  });
});

/**
 * The pruner finds rows by ctid, which is unique only within one partition: rows at the same
 * places in another partition, not yet confirmed, must survive a pass that deletes confirmed ones.
 */
describe('pruning a partitioned outbox', () => {
  const outbox = new TestOutbox();
  beforeAll(() => createListPartitioned(outbox));
  afterAll(() => outbox.destroy());

  it('deletes the confirmed rows of one partition and none of the unconfirmed rows at the same places in another', async () => {
    expect((await cli(['setup'], outbox.relayEnv())).code).toBe(0);
    const insert = (ids: readonly string[], aggregateType: string) =>
      outbox.pool.query(`INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) SELECT id, $2, 'agg_pp', 'x.happened', '{}' FROM unnest($1::text[]) id`, [ids, aggregateType]);
    const remaining = async (ids: readonly string[]) => (await outbox.pool.query(`SELECT event_id FROM ${outbox.table} WHERE event_id = ANY($1)`, [ids])).rows.length;
    const prune = (retention: string) => cli(['prune', '--retention', retention], outbox.relayEnv());
    const confirmed = Array.from({ length: 5 }, (_, i) => `evt_invoice_${i}`);
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      await insert(confirmed, 'invoice');
      // A mark (the rows too young to go yet), then the relay's position past it: the rows are proved confirmed.
      expect((await prune('1d')).code).toBe(0);
      const marks = `${outbox.table}_prune_marks`;
      await eventually('the relay to confirm past the pruner\'s mark', async () => {
        const { rows } = await outbox.pool.query(`SELECT (SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1) >= (SELECT max(wal_lsn) FROM ${marks}) AS past`, [outbox.slot]);
        return rows[0].past === true ? true : undefined;
      }, 30_000);
    } finally {
      expect(await relay.stop()).toBe(0);
    }
    // Committed with the relay stopped: in the other partition, at the same ctids, not confirmed.
    const unconfirmed = Array.from({ length: 5 }, (_, i) => `evt_refund_${i}`);
    await insert(unconfirmed, 'refund');
    const pass = await prune('0s');
    expect(pass.code, pass.stderr).toBe(0);
    expect(await remaining(confirmed)).toBe(0);
    expect(await remaining(unconfirmed)).toBe(5);
  });
});

/**
 * `recover` reads the retained rows by their place, which in a partitioned outbox is the
 * partition and the ctid: rows at the same ctids in two partitions must each go out once.
 */
describe('recovering a partitioned outbox', () => {
  const outbox = new TestOutbox();
  beforeAll(() => createListPartitioned(outbox));
  afterAll(() => outbox.destroy());

  it('publishes every retained row of every partition again, rows at the same ctids included', async () => {
    expect((await cli(['setup'], outbox.relayEnv())).code).toBe(0);
    const ids = { invoice: Array.from({ length: 5 }, (_, i) => `evt_inv_${i}`), refund: Array.from({ length: 5 }, (_, i) => `evt_ref_${i}`) };
    for (const [aggregateType, events] of Object.entries(ids)) {
      await outbox.pool.query(`INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) SELECT id, $2, 'agg_pr', 'x.happened', '{}' FROM unnest($1::text[]) id`, [events, aggregateType]);
    }
    await outbox.pool.query('SELECT pg_drop_replication_slot($1)', [outbox.slot]);
    const reader = await new TopicReader().start([outbox.topic('invoice'), outbox.topic('refund')]);
    try {
      const recovered = await cli(['recover'], outbox.relayEnv());
      expect(recovered.code, recovered.stderr).toBe(0);
      expect(recovered.stdout).toContain('published again: 10 rows');
      await reader.until('the 10 rows', (records) => records.length >= 10);
      expect(reader.records.map((record) => record.headers.event_id).sort()).toEqual([...ids.invoice, ...ids.refund].sort());
    } finally {
      await reader.stop();
    }
  });
});
