import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { expectOrderPerAggregate } from '../harness/fixture.js';
import { TopicReader, type ConsumedRecord } from '../harness/kafka.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';
import { SeveralOutboxes } from '../harness/several-outboxes.js';
import { invalidateSlot, useSmallWalKeepSize } from '../harness/slot-loss.js';

/**
 * `recover`, `cutover` and `replay` with several outboxes in one slot: the slot is all of
 * theirs, so its loss, or its making under rows already in the tables, is every table's.
 *
 * `recover`: the slot is all of theirs, so its loss is every table's. Recover re-creates it once and publishes again, in one snapshot, the retained rows of
 * every table that cannot be proved delivered (each table by its own pruner marks), in commit
 * order across the tables; message outboxes have no rows, so what they emitted after the lost
 * position is gone, and recover says so. Then the stream goes on: every table event arrives.
 */
describe.each([{ loss: 'dropped' as const }, { loss: 'lost' as const }])('recover a $loss slot of several outboxes', ({ loss }) => {
  const { outboxes, reader } = useSetUpOutboxes();
  const sequences = new Map<string, number>();
  useSmallWalKeepSize(outboxes);

  /** `count` transactions over three aggregates, each writing to every table and emitting two messages; their event ids. */
  const commit = (count: number) => commitTransactions(outboxes, sequences, count);

  it('publishes again every table row not proved delivered, in commit order across tables; says what the message outbox lost; the stream goes on', { timeout: 240_000 }, async () => {
    const delivered = await commit(10);
    const relay = new RelayProcess(outboxes.relayEnv()).start();
    try {
      await relay.waitActive();
      await reader().until('the first transactions', (records) => delivered.every((id) => seen(records).has(id)), 60_000, () => relay.tail());
      if (loss === 'lost') {
        // A pruner pass marks every table (retention keeps every row); the relay's keepalives take
        // the slot past the marks, so the rows before them are proved delivered.
        const pass = await cli(['prune'], outboxes.relayEnv());
        expect(pass.code, pass.stderr).toBe(0);
        await eventually('the slot to confirm past every table\'s mark', async () => {
          const { rows } = await outboxes.pool.query<{ passed: boolean }>(
            `SELECT bool_and(s.confirmed_flush_lsn >= m.wal_lsn) AS passed FROM pg_replication_slots s,
               (SELECT max(wal_lsn) AS wal_lsn FROM ${outboxes.tables.a}_prune_marks UNION ALL SELECT max(wal_lsn) FROM ${outboxes.tables.b}_prune_marks UNION ALL SELECT max(wal_lsn) FROM ${outboxes.tables.c}_prune_marks) m
             WHERE s.slot_name = $1`,
            [outboxes.slot],
          );
          return rows[0]?.passed ? true : undefined;
        }, 30_000);
      }
    } finally {
      expect(await relay.stop()).toBe(0);
    }
    const undelivered = await commit(5);
    if (loss === 'dropped') await outboxes.pool.query('SELECT pg_drop_replication_slot($1)', [outboxes.slot]);
    else await invalidateSlot(outboxes);
    const whileGone = await commit(5);

    const refused = new RelayProcess(outboxes.relayEnv()).start();
    expect(await refused.waitExit(30_000), refused.tail()).toBe(1);
    expect(refused.tail()).toMatch(loss === 'dropped' ? /SOURCE_SLOT_MISSING/ : /SOURCE_SLOT_LOST/);

    // Each transaction writes one row to each of the three tables.
    const retained = 3 * (delivered.length + undelivered.length + whileGone.length) / 5;
    const toPublish = loss === 'dropped' ? retained : 3 * (undelivered.length + whileGone.length) / 5;
    const dryRun = await cli(['recover', '--dry-run'], outboxes.relayEnv());
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toContain(`would publish again: ${toPublish} rows`);
    if (loss === 'lost') expect(dryRun.stdout).toContain(`slot lost; ${retained - toPublish} retained rows are proved delivered`);
    expect(dryRun.stdout).toContain(`message outbox message:${outboxes.prefix} has no rows to publish again: what it emitted after the slot's last confirmed position is not recovered`);

    const recovered = await cli(['recover'], outboxes.relayEnv());
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(recovered.stdout).toContain(`published again: ${toPublish} rows`);
    expect(recovered.stdout).toMatch(/new slot at \d+\/[0-9A-F]+/);

    const streaming = new RelayProcess(outboxes.relayEnv()).start();
    try {
      await streaming.waitActive();
      const after = await commit(5);
      const committed = await outboxes.committed();
      // The messages the old slot had not confirmed exist nowhere but in the WAL it lost.
      const lostMessages = new Set([...undelivered, ...whileGone].filter((id) => committed.get(id) === 'message'));
      const expected = [...committed.keys()].filter((id) => !lostMessages.has(id));
      await reader().until(`all ${expected.length} recoverable events`, (records) => expected.every((id) => seen(records).has(id)), 90_000, () => streaming.tail());
      expect(after.every((id) => seen(reader().records).has(id))).toBe(true);
      // First deliveries in commit order per aggregate, across the three tables and the messages.
      expectOrderPerAggregate(reader().records.filter((record) => record.topic === outboxes.sharedTopic));
      const copies = reader().records.length - seen(reader().records).size;
      // Nothing proved the dropped slot's deliveries; the lost slot's marks proved every one.
      expect(copies).toBe(loss === 'dropped' ? 3 * delivered.length / 5 : 0);
      process.stdout.write(`recover a ${loss} slot of several outboxes: ${committed.size} committed, ${toPublish} table rows published again, ${lostMessages.size} messages lost with the slot, ${copies} copies\n`);
    } finally {
      expect(await streaming.stop()).toBe(0);
    }
  });
});

/**
 * `cutover` of several polling outboxes at once: one snapshot, the pending rows of every table
 * published in commit order across them, the rows the pollers sent left alone, and the stream
 * goes on from the slot. The pending condition is checked on each table, naming one it cannot
 * apply to.
 */
describe('cutover of several polling outboxes', () => {
  const outboxes = new SeveralOutboxes();
  const sequences = new Map<string, number>();
  const pending = "status = 'pending'";
  let reader: TopicReader;
  beforeAll(async () => {
    await outboxes.create();
    // The pollers' tables: the relay's default shape (a and c) and b's own, each with a status column the pollers mark.
    for (const table of [outboxes.tables.a, outboxes.tables.c]) {
      await outboxes.pool.query(`CREATE TABLE ${table} (event_id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now(), status text NOT NULL DEFAULT 'pending')`);
    }
    reader = await new TopicReader().start([outboxes.sharedTopic, outboxes.tableCTopic]);
  });
  afterAll(async () => {
    await reader.stop();
    await outboxes.destroy();
  });

  it('refuses a pending condition one table cannot take, naming it; then publishes every table\'s pending rows in one snapshot, in commit order across them, and streams on', { timeout: 180_000 }, async () => {
    const committed = await commitTransactions(outboxes, sequences, 10);
    const refused = await cli(['cutover', '--dry-run', '--pending', pending], outboxes.relayEnv());
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`[CUTOVER_CONDITION]: --pending "${pending}" was refused by Postgres: column "status" does not exist; expected a boolean expression on the columns of "public"."${outboxes.tables.b}"`);
    await outboxes.pool.query(`ALTER TABLE ${outboxes.tables.b} ADD COLUMN status text NOT NULL DEFAULT 'pending'`);

    // The pollers sent the first four transactions' rows.
    const sent = committed.slice(0, 4 * 5);
    for (const table of Object.values(outboxes.tables)) {
      const id = table === outboxes.tables.b ? 'id::text' : 'event_id';
      await outboxes.pool.query(`UPDATE ${table} SET status = 'sent' WHERE ${id} = ANY($1)`, [sent]);
    }
    const dryRun = await cli(['cutover', '--dry-run', '--pending', pending], outboxes.relayEnv());
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toContain(`would publish: 18 rows matching ${pending}`);
    expect(dryRun.stdout).toContain('12 rows do not match (the poller sent them)');
    const cutover = await cli(['cutover', '--pending', pending], outboxes.relayEnv());
    expect(cutover.code, cutover.stderr).toBe(0);
    expect(cutover.stdout).toContain(`published: 18 rows matching ${pending}`);

    const relay = new RelayProcess(outboxes.relayEnv()).start();
    try {
      await relay.waitActive();
      const after = await commitTransactions(outboxes, sequences, 5);
      const carriers = await outboxes.committed();
      // Before the slot there was nothing to stream the messages of: no relay ever read them.
      const expected = [...committed.slice(4 * 5).filter((id) => carriers.get(id) !== 'message'), ...after];
      await reader.until(`all ${expected.length} events the relay owes`, (records) => expected.every((id) => seen(records).has(id)), 90_000, () => relay.tail());
      const sentAgain = reader.records.filter((record) => sent.includes(record.headers.event_id!));
      expect(sentAgain.map((record) => record.headers.event_id), 'rows the pollers had sent').toEqual([]);
      expectOrderPerAggregate(reader.records.filter((record) => record.topic === outboxes.sharedTopic));
      process.stdout.write(`cutover of several outboxes: 30 table rows, 12 sent by the pollers and left alone, 18 published, ${after.length} streamed after\n`);
    } finally {
      expect(await relay.stop()).toBe(0);
    }
  });

  it('hands every table back: refused while message outbox events are unconfirmed; then marks sent what the relay confirmed in each table and leaves the rest pending', { timeout: 120_000 }, async () => {
    await commitTransactions(outboxes, sequences, 2);
    const refused = await cli(['handback', '--pending', pending, '--mark-sent', "status = 'sent'"], outboxes.relayEnv());
    expect(refused.code, `${refused.stdout}${refused.stderr}`).toBe(1);
    expect(refused.stderr).toContain("4 events of the message outboxes are after the slot's confirmed position");
    // The relay confirms them; then rows a relay never streams, of table a and of table b.
    const relay = new RelayProcess(outboxes.relayEnv()).start();
    await relay.waitActive();
    await eventually('the slot to confirm everything', async () => {
      const { rows } = await outboxes.pool.query<{ caught_up: boolean }>('SELECT confirmed_flush_lsn >= pg_current_wal_lsn() AS caught_up FROM pg_replication_slots WHERE slot_name = $1', [outboxes.slot]);
      return rows[0]?.caught_up ? true : undefined;
    }, 30_000);
    expect(await relay.stop()).toBe(0);
    const unconfirmed = [randomUUID(), randomUUID()];
    await outboxes.pool.query(`INSERT INTO ${outboxes.tables.a} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'invoice', 'inv_x', 'invoice.paid', '{}')`, [unconfirmed[0]]);
    await outboxes.pool.query(`INSERT INTO ${outboxes.tables.b} (id, kind, aggregate, type, body) VALUES ($1, 'invoice', 'inv_x', 'invoice.paid', '{}')`, [unconfirmed[1]]);
    const pendingNow = async () => {
      const { rows } = await outboxes.pool.query<{ n: string }>(Object.values(outboxes.tables).map((table) => `SELECT count(*) AS n FROM ${table} WHERE ${pending}`).join(' UNION ALL '));
      return rows.reduce((sum, row) => sum + Number(row.n), 0);
    };
    const before = await pendingNow();

    const handback = await cli(['handback', '--pending', pending, '--mark-sent', "status = 'sent'"], outboxes.relayEnv());
    expect(handback.code, handback.stderr).toBe(0);
    expect(handback.stdout).toContain(`marked sent: ${before - 2} pending rows the relay confirmed; left pending: 2 rows the relay had not confirmed`);
    const { rows: left } = await outboxes.pool.query<{ id: string }>(`SELECT event_id AS id FROM ${outboxes.tables.a} WHERE ${pending} UNION ALL SELECT id::text FROM ${outboxes.tables.b} WHERE ${pending} UNION ALL SELECT event_id FROM ${outboxes.tables.c} WHERE ${pending}`);
    expect(left.map((row) => row.id).sort()).toEqual([...unconfirmed].sort());
    expect((await outboxes.pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [outboxes.slot])).rows).toHaveLength(0);
  });
});

/** `replay` with several outboxes: the rows asked for, of every table, in one snapshot; the message outbox named as having none. */
describe('replay of several outboxes', () => {
  const { outboxes, reader } = useSetUpOutboxes();

  it('publishes again the rows asked for from every table, with their event ids; says the message outbox has none', async () => {
    const committed = await commitTransactions(outboxes, new Map(), 6);
    const carriers = await outboxes.committed();
    const chosen = committed.filter((_, index) => index % 2 === 0);
    const replay = await cli(['replay', '--event-id', chosen.join(',')], outboxes.relayEnv());
    expect(replay.code, replay.stderr).toBe(0);
    const rows = chosen.filter((id) => carriers.get(id) !== 'message');
    expect(replay.stdout).toContain(`replayed ${rows.length} events`);
    expect(`${replay.stdout}${replay.stderr}`).toContain(`message outbox message:${outboxes.prefix} has no rows to publish again`);
    await reader().until(`the ${rows.length} replayed rows`, (records) => records.length >= rows.length);
    expect(reader().records.map((record) => record.headers.event_id).sort()).toEqual([...rows].sort());
    expect(new Set(reader().records.map((record) => record.headers.outbox_source))).toEqual(new Set(Object.values(outboxes.tables).map((table) => `public.${table}`)));
    expect(reader().records.every((record) => record.headers.outbox_commit_lsn === '0/0')).toBe(true);
  });
});

/** Three tables and a message outbox, set up (publication and slot) before the describe's tests, and a reader of their topics. */
function useSetUpOutboxes(): { readonly outboxes: SeveralOutboxes; readonly reader: () => TopicReader } {
  const outboxes = new SeveralOutboxes();
  let reader: TopicReader | undefined;
  beforeAll(async () => {
    await outboxes.create();
    const done = await cli(['setup'], outboxes.relayEnv());
    expect(done.code, done.stderr).toBe(0);
    reader = await new TopicReader().start([outboxes.sharedTopic, outboxes.tableCTopic]);
  });
  afterAll(async () => {
    await reader?.stop();
    await outboxes.destroy();
  });
  return { outboxes, reader: () => reader! };
}

/** `count` transactions over three aggregates, each writing to every table and emitting two messages; their event ids. */
async function commitTransactions(outboxes: SeveralOutboxes, sequences: Map<string, number>, count: number): Promise<string[]> {
  const client = await outboxes.pool.connect();
  const ids: string[] = [];
  try {
    for (let n = 0; n < count; n += 1) {
      const aggregate = `inv_${n % 3}`;
      const first = (sequences.get(aggregate) ?? 0) + 1;
      const written = await outboxes.transaction(client, aggregate, first);
      sequences.set(aggregate, first + written.length - 1);
      ids.push(...written);
    }
  } finally {
    client.release();
  }
  return ids;
}

function seen(records: readonly ConsumedRecord[]): Set<string | undefined> {
  return new Set(records.map((record) => record.headers.event_id));
}
