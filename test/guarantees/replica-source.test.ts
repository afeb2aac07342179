import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RelayError } from '../../src/errors.js';
import { databaseAccess } from '../../src/pg-connection.js';
import { setup, type SetupTarget } from '../../src/setup/setup.js';
import { cli } from '../harness/cli.js';
import { expectExactlyOnce } from '../harness/exactly-once.js';
import { useFailoverPair, type FailoverMajor } from '../harness/failover-pair.js';
import { get, metric } from '../harness/http.js';
import { createTopics, TopicReader } from '../harness/kafka.js';
import { OutboxLoad } from '../harness/load.js';
import { billingEvent, TestOutbox } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * Issue 49: the slot on a physical standby (OUTBOX_REPLICA_URL, Postgres 16+), the WAL read
 * there. On each major with logical decoding on a standby, a primary and its standby made for
 * the file (scripts/stack.sh up failover): the settings a standby's slot needs refused by name,
 * prune deleting what the standby's slot confirmed, an idle outbox holding no WAL on the standby,
 * and under load kill -9 of the relay, a restart of the standby and its promotion, with
 * exactly-once delivery: every committed event once to a read_committed consumer.
 */
const STANDBY_MAJORS: readonly FailoverMajor[] = [16, 17, 18];

describe.each(STANDBY_MAJORS)('the slot on a Postgres %i standby (OUTBOX_REPLICA_URL)', (major) => {
  const pair = useFailoverPair(major);
  let outbox: TestOutbox;
  let standby: pg.Client;

  const target = (replicaUrl = pair.standbyUrl): SetupTarget => ({
    database: databaseAccess(pair.databaseUrl),
    outboxes: [{ table: { schema: 'public', name: outbox.table } }],
    publication: outbox.publication,
    slot: outbox.slot,
    slotServer: { database: databaseAccess(replicaUrl), standby: true },
  });
  const relayEnv = (extra: Record<string, string> = {}) => outbox.relayEnv({ OUTBOX_REPLICA_URL: pair.standbyUrl, OUTBOX_SLOT_POLL_INTERVAL: '300ms', ...extra });
  const standbySlot = async () => {
    const { rows } = await standby.query<{ active: boolean; lag: string; held: string }>(
      `SELECT active, (pg_last_wal_replay_lsn() - confirmed_flush_lsn)::text AS lag, (pg_last_wal_replay_lsn() - restart_lsn)::text AS held
         FROM pg_replication_slots WHERE slot_name = $1`,
      [outbox.slot],
    );
    if (!rows[0]) throw new Error(`slot ${outbox.slot} is missing on the standby`);
    return { active: rows[0].active, lagBytes: Number(rows[0].lag), heldBytes: Number(rows[0].held) };
  };
  /** A setting of the standby changed with ALTER SYSTEM (allowed during recovery), applied by a reload or a restart. */
  const setOnStandby = async (name: string, value: string | null, apply: 'reload' | 'restart') => {
    await standby.query(value === null ? `ALTER SYSTEM RESET ${name}` : `ALTER SYSTEM SET ${name} = ${pg.escapeLiteral(value)}`);
    if (apply === 'reload') {
      await standby.query('SELECT pg_reload_conf()');
      await delay(300);
      return;
    }
    await standby.end();
    await pair.node('stop', 'standby');
    await pair.node('start', 'standby');
    standby = await connected(pair.standbyUrl);
  };

  beforeAll(async () => {
    outbox = new TestOutbox({ databaseUrl: pair.databaseUrl, sqlUrl: pair.primaryUrl });
    standby = await connected(pair.standbyUrl);
    await createTopics([outbox.topic('invoice'), outbox.topic('credit'), outbox.topic('refund')]);
  });

  afterAll(async () => {
    await standby?.end().catch(() => undefined);
    await outbox?.pool.end().catch(() => undefined);
  });

  it('refuses, naming it, each setting a standby needs for a logical slot, and a server of another cluster; then makes the slot on the standby', async () => {
    const refusal = async (what: RegExp, replicaUrl?: string) => {
      const error = await setup(target(replicaUrl)).then(() => null, (caught: unknown) => caught);
      expect(error).toBeInstanceOf(RelayError);
      expect(error).toMatchObject({ code: 'SETUP_STANDBY' });
      expect((error as Error).message).toMatch(what);
    };
    await setOnStandby('hot_standby_feedback', 'off', 'reload');
    await refusal(/hot_standby_feedback is off on the standby/);
    await setOnStandby('hot_standby_feedback', null, 'reload');
    await setOnStandby('primary_slot_name', '', 'reload');
    await refusal(/primary_slot_name is empty on the standby/);
    await setOnStandby('primary_slot_name', null, 'reload');
    await setOnStandby('wal_level', 'replica', 'restart');
    await refusal(/wal_level is "replica" on the standby/);
    await setOnStandby('wal_level', null, 'restart');
    // The test services' own Postgres: a primary of another cluster.
    await refusal(/not a standby of DATABASE_URL's primary: its system identifier is/, inject('services').databaseUrl);

    const done = await setup(target());
    expect(done.lines).toContain(`OUTBOX_REPLICA_URL: a standby (Postgres ${await serverVersion(standby)}, hot_standby_feedback on, through the primary's physical slot outbox_standby): the slot lives and the WAL is read there`);
    expect(done.lines.find((line) => line.startsWith(`slot ${outbox.slot}: created on the standby at`)), done.lines.join('\n')).toBeDefined();
    const onPrimary = await outbox.pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot]);
    expect(onPrimary.rows, 'no slot on the primary').toEqual([]);
    expect((await standbySlot()).active).toBe(false);
  });

  it('streams from the standby, prunes what its slot confirmed, and an idle outbox holds no WAL there after the primary writes 64 MB elsewhere', async () => {
    const port = await freePort();
    const relay = new RelayProcess(relayEnv({ OUTBOX_HTTP_PORT: String(port) })).start();
    const filler = `filler_${outbox.id}`;
    try {
      await relay.waitActive();
      expect(relay.logs.find((line) => /^active:/.test(line.msg))?.server, relay.tail()).toBe('standby');
      await eventually('the metrics to say the slot is on a standby', async () => (metric((await get(port, '/metrics')).body, 'outbox_relay_slot_on_standby') === 1 ? true : undefined), 30_000, 250);
      expect((await cli(['status'], relayEnv())).stdout).toMatch(/slot server\s+a standby \(OUTBOX_REPLICA_URL\)/);

      // Their own topic: the exactly-once test below counts the invoice topic's events.
      await outbox.insert(Array.from({ length: 20 }, (_, i) => ({ ...billingEvent('cred_standby_prune', i), aggregateType: 'credit' })));
      const prune = () => cli(['prune', '--retention', '0s'], relayEnv());
      await eventually('prune to delete the rows the standby slot confirmed', async () => {
        const pass = await prune();
        expect(pass.code, pass.stderr).toBe(0);
        return (await outbox.committedIds()).length === 0 ? true : undefined;
      }, 60_000, 500);

      await outbox.pool.query(`CREATE TABLE ${filler} AS SELECT i, repeat('x', 900) AS pad FROM generate_series(1, 70000) AS i`);
      const written = await outbox.pool.query<{ bytes: string }>(`SELECT pg_total_relation_size('${filler}')::text AS bytes`);
      expect(Number(written.rows[0]!.bytes)).toBeGreaterThan(64 << 20);
      // The standby's slot moves at what it replayed; its restart point at the primary's next
      // running-transactions record (every 15 s while it writes).
      const settled = await eventually('the standby slot to hold no more than 16 MB after 64 MB elsewhere', async () => {
        const slot = await standbySlot();
        return slot.lagBytes < 1 << 20 && slot.heldBytes < 16 << 20 ? slot : undefined;
      }, 90_000, 500);
      process.stdout.write(`standby ${major} idle slot: ${JSON.stringify(settled)} after ${written.rows[0]!.bytes} bytes elsewhere\n`);
      expect(await relay.stop()).toBe(0);
    } finally {
      await relay.kill9();
      await outbox.pool.query(`DROP TABLE IF EXISTS ${filler}`).catch(() => undefined);
    }
  });

  it("says in status how long an outage the slot survives (unbounded here: no idle timeout, no WAL limit)", async () => {
    const status = await cli(['status'], relayEnv());
    expect(status.stdout).toMatch(/idle timeout\s+none \(idle_replication_slot_timeout off, or before Postgres 18\)/);
    expect(status.stdout).toMatch(/outage budget\s+unbounded/);
  });

  // Postgres 18's idle_replication_slot_timeout, on a slot of the primary's (the standby's own
  // slots are the standby's business): the new way to lose a slot, handled as the others.
  if (major >= 18) {
    it('a slot unread longer than idle_replication_slot_timeout is lost at the next checkpoint: status says the budget, run stops with SOURCE_SLOT_LOST naming the setting', async () => {
      const idle = new TestOutbox({ databaseUrl: pair.primaryUrl });
      await idle.create();
      const setTimeout = async (value: string | null) => {
        await idle.pool.query(value === null ? 'ALTER SYSTEM RESET idle_replication_slot_timeout' : `ALTER SYSTEM SET idle_replication_slot_timeout = '${value}'`);
        await idle.pool.query('SELECT pg_reload_conf()');
        await delay(300);
      };
      try {
        await setTimeout('1h');
        const status = await cli(['status'], idle.relayEnv());
        expect(status.stdout).toMatch(/idle timeout\s+60 min: Postgres invalidates the slot once it has been unread that long/);
        expect(status.stdout).toMatch(/outage budget\s+(59|60) min: a longer outage of every relay may lose the slot/);
        await setTimeout('1s');
        await delay(2_000);
        await idle.pool.query('CHECKPOINT');
        const { rows } = await idle.pool.query<{ reason: string | null }>('SELECT invalidation_reason AS reason FROM pg_replication_slots WHERE slot_name = $1', [idle.slot]);
        expect(rows[0]?.reason).toBe('idle_timeout');
        const relay = new RelayProcess(idle.relayEnv()).start();
        expect(await relay.waitExit(30_000), relay.tail()).toBe(1);
        const fatal = relay.logs.find((line) => line.level === 60);
        expect(fatal, relay.tail()).toMatchObject({ code: 'SOURCE_SLOT_LOST' });
        expect(String(fatal!.err)).toMatch(/is lost: it was unread for longer than idle_replication_slot_timeout\..*`outbox-relay recover`.*raise idle_replication_slot_timeout/);
      } finally {
        await setTimeout(null);
        await idle.destroy();
      }
    });
  }

  it('recovers a slot lost on the standby there: recover re-creates it on the standby and publishes the retained rows again, then run streams on from it', async () => {
    // Their own topic and rows, deleted afterwards: the exactly-once test below counts the table.
    const refund = (sequence: number) => ({ ...billingEvent('ref_standby_recover', sequence), aggregateType: 'refund' });
    const reader = await new TopicReader().start([outbox.topic('refund')]);
    try {
      // Lost while no relay ran, with rows committed meanwhile.
      await standby.query('SELECT pg_drop_replication_slot($1)', [outbox.slot]);
      await outbox.insert(Array.from({ length: 10 }, (_, i) => refund(i)));
      const dryRun = await cli(['recover', '--dry-run'], relayEnv());
      expect(dryRun.code, dryRun.stderr).toBe(0);
      expect(dryRun.stdout).toMatch(/slot missing;[^\n]*\nwould publish again: 10 rows/);
      const recovered = await cli(['recover'], relayEnv());
      expect(recovered.code, `${recovered.stdout}${recovered.stderr}`).toBe(0);
      expect(recovered.stdout).toMatch(/published again: 10 rows/);
      expect((await standbySlot()).active).toBe(false);
      const onPrimary = await outbox.pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot]);
      expect(onPrimary.rows, 'no slot on the primary').toEqual([]);

      const relay = new RelayProcess(relayEnv()).start();
      try {
        await relay.waitActive();
        await outbox.insert(Array.from({ length: 5 }, (_, i) => refund(10 + i)));
        await reader.until('every refund, the recovered and the streamed', (records) => new Set(records.map((record) => record.headers.event_id)).size >= 15, 60_000, () => relay.tail());
        expect(await relay.stop()).toBe(0);
      } finally {
        await relay.kill9();
      }
      const ids = new Set(reader.records.map((record) => record.headers.event_id));
      const committed = await outbox.pool.query<{ event_id: string }>("SELECT event_id FROM " + outbox.table + " WHERE aggregate_type = 'refund'");
      expect(committed.rows.filter((row) => !ids.has(row.event_id))).toEqual([]);
    } finally {
      await reader.stop();
      await outbox.pool.query(`DELETE FROM ${outbox.table} WHERE aggregate_type = 'refund'`);
    }
  });

  // Issue 62: a kill -9 after the promotion restarted on timeline 2 with Kafka's progress saying
  // timeline 1 past its end (SOURCE_TIMELINE_DIVERGED), and `prune --every` died at the promotion.
  it('under load, exactly-once: kill -9 twice, the standby restarted, then the primary killed and the standby promoted, kill -9 after: every committed event once, in order, read_committed; prune --every rides through', { timeout: 300_000 }, async () => {
    const env = () => relayEnv({ OUTBOX_DELIVERY: 'exactly-once', OUTBOX_PROGRESS_TOPIC: `${outbox.topicPrefix}.progress` });
    const load = new OutboxLoad(outbox, { writers: 3, rowsPerTransaction: 2, aggregates: 15, pauseMs: 3, rollbackEvery: 9 }).start();
    const kills = 2;
    let relay = new RelayProcess(env()).start();
    // The sidecar on DATABASE_URL's two hosts, a pass a second; the load's rows are kept (retention 1h).
    const pruner = new RelayProcess(relayEnv(), ['--every', '1s', '--retention', '1h'], 'prune').start();
    try {
      await pruner.waitForLog(/^prune: pass done/, 60_000);
      await relay.waitActive();
      for (let kill = 0; kill < kills; kill += 1) {
        await delay(1_500);
        await relay.kill9();
        await eventually('the standby slot to be released', async () => ((await standbySlot()).active ? undefined : true));
        relay = new RelayProcess(env()).start();
        await relay.waitActive();
      }
      await delay(1_000);
      // A restart of the standby: the relay reconnects to it.
      await standby.end();
      await pair.node('stop', 'standby');
      await pair.node('start', 'standby');
      standby = await connected(pair.standbyUrl);
      await eventually('the relay to stream from the restarted standby', async () => ((await standbySlot()).active ? true : undefined), 60_000, 250);
      await delay(1_500);

      // The promotion under the writers, the old primary still up: the writers move to the
      // promoted standby, and the old primary is killed (the pruner, on both hosts, must find the
      // new one).
      // A prune pass is under way on the primary when it dies: it waits for a lock on the marks
      // table there, so its connection is cut in the middle (pg's 'error' event).
      const oldPrimary = await connected(pair.primaryUrl);
      await oldPrimary.query('BEGIN');
      await oldPrimary.query(`LOCK TABLE ${outbox.table}_prune_marks IN ACCESS EXCLUSIVE MODE`);
      await eventually('a prune pass to wait on the primary', async () => {
        // Not in the locking transaction: pg_stat_activity is read once per transaction.
        const { rows } = await outbox.pool.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'outbox-relay-prune' AND wait_event_type = 'Lock'");
        return rows.length > 0 ? true : undefined;
      }, 30_000, 100);
      const beforePromotion = load.committedTransactions;
      await standby.end();
      // The standby is synchronous: promoted while the old primary is up, the old primary's
      // commits would wait for ever; it is killed at once after.
      await pair.promote();
      const promotedAt = Date.now();
      outbox.useServer(pair.standbyUrl);
      await pair.node('kill', 'primary');
      await oldPrimary.end().catch(() => undefined);
      const noticed = await relay.waitForLog(/is a primary now \(promoted\)/, 60_000);
      await eventually('writers to commit on the promoted standby', async () => (load.committedTransactions > beforePromotion + 20 ? true : undefined), 60_000, 250);
      // kill -9 after the promotion: the restart resumes on timeline 2 from Kafka's progress.
      await relay.kill9();
      relay = new RelayProcess(env()).start();
      await relay.waitActive();
      const afterRestart = load.committedTransactions;
      await eventually('writers to commit after the restart', async () => (load.committedTransactions > afterRestart + 20 ? true : undefined), 60_000, 250);
      await load.stop();

      // The pruner stayed up through the promotion and prunes on the new primary: rows written
      // there older than the retention go once the relay confirmed them.
      const aged = Array.from({ length: 5 }, () => randomUUID());
      for (const id of aged) {
        await outbox.pool.query(
          `INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload, created_at) VALUES ($1, 'credit', 'cred_promoted_prune', 'invoice.paid', '{}'::jsonb, now() - interval '2 hours')`,
          [id],
        );
      }
      await eventually('prune --every to delete the aged rows on the promoted standby', async () => {
        if (!pruner.alive) throw new Error(`prune --every exited:\n${pruner.tail()}`);
        const { rows } = await outbox.pool.query('SELECT 1 FROM ' + outbox.table + ' WHERE event_id = ANY ($1::text[])', [aged]);
        return rows.length === 0 ? true : undefined;
      }, 60_000, 500);
      expect(pruner.alive, pruner.tail()).toBe(true);
      expect(pruner.logs.some((line) => /^prune: pass failed/.test(line.msg)), pruner.tail()).toBe(true);

      const { records, uncommittedDuplicates } = await expectExactlyOnce(outbox, load.rolledBackIds, () => relay.tail());
      expect((await cli(['status'], relayEnv())).stdout).toMatch(/slot server\s+OUTBOX_REPLICA_URL, promoted: a primary now/);
      expect(relay.logs.some((line) => line.code === 'SOURCE_SLOT_MISSING')).toBe(false);
      expect(await relay.stop()).toBe(0);
      expect(await pruner.stop()).toBe(0);
      process.stdout.write(
        `standby ${major} under load: ${JSON.stringify({ committed: records.length, kills: kills + 1, killsAfterPromotion: 1, standbyRestarts: 1, promotions: 1, lost: 0, duplicatesReadCommitted: 0, duplicatesReadUncommitted: uncommittedDuplicates, transactionsBeforePromotion: beforePromotion, promotionNoticedAfterMs: Number(noticed.time) - promotedAt, prunePassesFailed: pruner.logs.filter((line) => /^prune: pass failed/.test(line.msg)).length })}\n`,
      );
    } finally {
      await load.stop();
      await relay.kill9();
      await pruner.kill9();
    }
  });
});

async function connected(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

async function serverVersion(client: pg.Client): Promise<string> {
  const { rows } = await client.query<{ version: string }>("SELECT current_setting('server_version') AS version");
  return rows[0]!.version;
}
