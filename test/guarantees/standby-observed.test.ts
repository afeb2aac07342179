// vitest: runs alone (the failover pair's fixed ports, which failover.test.ts and replica-source.test.ts start too)
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseAccess } from '../../src/pg-connection.js';
import { setup } from '../../src/setup/setup.js';
import { cli } from '../harness/cli.js';
import { expectEveryCommittedEventDelivered, expectOrderPerAggregate } from '../harness/fixture.js';
import { useFailoverPair, type FailoverMajor } from '../harness/failover-pair.js';
import { get, metric } from '../harness/http.js';
import { createTopics } from '../harness/kafka.js';
import { OutboxLoad } from '../harness/load.js';
import { TestOutbox } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * Issue 62, faults 5 and 6: what an operator sees of a slot on a physical standby
 * (OUTBOX_REPLICA_URL), on each major with logical decoding on a standby (on 17 and 18 the
 * standby also synchronizes the primary's failover slots).
 * - The standby's replay delay (the primary's commits the standby has not replayed, so the relay
 *   cannot have read them) is reported as a metric and in `status`, in bytes and seconds; an
 *   idle primary's WAL without a transaction in it is no delay; after a pause nothing is lost
 *   or reordered.
 * - The slot's own server is never its own "standby copy", before or after its promotion, and
 *   the slot-sync alert's metrics stay quiet: a standby's slot is no failover slot, it stays
 *   through that standby's promotion.
 */
const STANDBY_MAJORS: readonly FailoverMajor[] = [16, 17, 18];

describe.each(STANDBY_MAJORS)('the slot on a Postgres %i standby, as an operator sees it', (major) => {
  const pair = useFailoverPair(major);
  /** outbox_relay_slot_failover of a standby's slot: no failover slot, unknown before 17. */
  const failover = major >= 17 ? 0 : -1;
  let outbox: TestOutbox;
  let standby: pg.Client;

  const relayEnv = (extra: Record<string, string> = {}) => outbox.relayEnv({ OUTBOX_REPLICA_URL: pair.standbyUrl, OUTBOX_SLOT_POLL_INTERVAL: '300ms', ...extra });
  const metrics = async (port: number) => (await get(port, '/metrics')).body;
  const replayDelay = async (port: number) => {
    const body = await metrics(port);
    return { bytes: metric(body, 'outbox_relay_source_replay_delay_bytes'), seconds: metric(body, 'outbox_relay_source_replay_delay_seconds') };
  };
  const statusRow = async (name: string) => {
    const status = await cli(['status'], relayEnv());
    expect(status.code, status.stderr).toBe(0);
    const row = status.stdout.split('\n').find((line) => line.startsWith(`${name} `));
    expect(row, status.stdout).toBeDefined();
    return row!.slice(name.length).trim();
  };

  beforeAll(async () => {
    outbox = new TestOutbox({ databaseUrl: pair.databaseUrl, sqlUrl: pair.primaryUrl });
    standby = new pg.Client({ connectionString: pair.standbyUrl });
    standby.on('error', () => undefined);
    await standby.connect();
    await createTopics([outbox.topic('invoice')]);
    await setup({
      database: databaseAccess(pair.databaseUrl),
      outboxes: [{ table: { schema: 'public', name: outbox.table } }],
      publication: outbox.publication,
      slot: outbox.slot,
      slotServer: { database: databaseAccess(pair.standbyUrl), standby: true },
    });
  });

  afterAll(async () => {
    await standby?.end().catch(() => undefined);
    await outbox?.pool.end().catch(() => undefined);
  });

  it("reports the standby's replay delay (metric and status) while its replay is paused under writers; an idle primary's WAL is no delay; resumed, every event arrives in order", { timeout: 240_000 }, async () => {
    const port = await freePort();
    const relay = new RelayProcess(relayEnv({ OUTBOX_HTTP_PORT: String(port) })).start();
    const load = new OutboxLoad(outbox, { writers: 3, rowsPerTransaction: 2, aggregates: 15, pauseMs: 10 });
    try {
      await relay.waitActive();
      // Idle, then WAL with no transaction in it (a checkpoint) the standby has not replayed: bytes, but nothing committed is late.
      await eventually('no replay delay while idle', async () => {
        const seen = await replayDelay(port);
        return seen.bytes === 0 && seen.seconds === 0 ? true : undefined;
      }, 30_000, 250);
      await standby.query('SELECT pg_wal_replay_pause()');
      await outbox.pool.query('CHECKPOINT');
      const idle = await eventually('WAL the standby has not replayed', async () => {
        const seen = await replayDelay(port);
        return seen.bytes > 0 ? seen : undefined;
      }, 30_000, 250);
      await delay(2_000);
      expect(idle.seconds, 'a checkpoint is no commit the relay waits for').toBe(0);
      expect((await replayDelay(port)).seconds).toBe(0);
      await standby.query('SELECT pg_wal_replay_resume()');

      load.start();
      await eventually('events to stream', async () => (metric(await metrics(port), 'outbox_relay_events_published_total') > 100 ? true : undefined), 60_000, 250);
      const streaming = await replayDelay(port);
      expect(streaming.seconds, 'a standby replaying as the primary writes is not late').toBeLessThan(2);

      await standby.query('SELECT pg_wal_replay_pause()');
      const pausedAt = Date.now();
      await delay(20_000);
      const paused = await replayDelay(port);
      const pausedFor = (Date.now() - pausedAt) / 1000;
      expect(paused.bytes, 'the primary wrote while the standby replayed nothing').toBeGreaterThan(100_000);
      expect(paused.seconds).toBeGreaterThan(pausedFor - 3);
      expect(paused.seconds).toBeLessThan(pausedFor + 3);
      const row = await statusRow('replay delay');
      expect(row).toMatch(/^\d+(\.\d)? (KiB|MiB) and \d+\.\d s behind the primary's commits; replay is paused on the standby/);
      const statusSeconds = Number(/and (\d+\.\d) s/.exec(row)![1]);
      expect(statusSeconds).toBeGreaterThan(pausedFor - 3);

      await standby.query('SELECT pg_wal_replay_resume()');
      await eventually('the delay to fall back after the resume', async () => ((await replayDelay(port)).seconds < 2 ? true : undefined), 60_000, 250);
      await load.stop();
      await eventually('no delay once the writers stopped', async () => {
        const seen = await replayDelay(port);
        return seen.bytes === 0 && seen.seconds === 0 ? true : undefined;
      }, 30_000, 250);
      expect(await statusRow('replay delay')).toMatch(/^none: the standby has replayed every commit of the primary/);

      const records = await expectEveryCommittedEventDelivered(outbox, () => relay.tail());
      expectOrderPerAggregate(records);
      process.stdout.write(`standby ${major} replay paused: ${JSON.stringify({ committed: (await outbox.committedIds()).length, pausedForSeconds: pausedFor, reportedSeconds: paused.seconds, reportedBytes: paused.bytes, statusSeconds, lost: 0 })}\n`);
      expect(await relay.stop()).toBe(0);
    } finally {
      await load.stop();
      await standby.query('SELECT pg_wal_replay_resume()').catch(() => undefined);
      await relay.kill9();
    }
  });

  it('never lists the slot\'s own server as its standby copy, before or after its promotion, and gives the slot-sync alert nothing to count', { timeout: 240_000 }, async () => {
    const port = await freePort();
    const relay = new RelayProcess(relayEnv({ OUTBOX_HTTP_PORT: String(port) })).start();
    const syncAlert = async () => {
      const body = await metrics(port);
      return { failover: metric(body, 'outbox_relay_slot_failover'), syncedStandbys: metric(body, 'outbox_relay_slot_synced_standbys'), onStandby: metric(body, 'outbox_relay_slot_on_standby') };
    };
    try {
      await relay.waitActive();
      const before = await eventually('the slot monitor to poll', async () => {
        const seen = await syncAlert();
        return seen.onStandby === 1 ? seen : undefined;
      }, 30_000, 250);
      // -1: no standby copy to expect (the rule fires at 0 with a failover slot).
      expect(before).toEqual({ failover, syncedStandbys: -1, onStandby: 1 });
      expect(await statusRow('standby copies')).toMatch(/^none to expect: the slot is OUTBOX_REPLICA_URL's standby's own/);

      await standby.end();
      await pair.node('stop', 'primary');
      await pair.promote();
      outbox.useServer(pair.standbyUrl);
      await relay.waitForLog(/is a primary now \(promoted\)/, 60_000);
      const after = await eventually('the slot monitor to see the promotion', async () => {
        const seen = await syncAlert();
        return seen.onStandby === 0 ? seen : undefined;
      }, 60_000, 250);
      expect(after).toEqual({ failover, syncedStandbys: -1, onStandby: 0 });
      const copies = await statusRow('standby copies');
      expect(copies).not.toMatch(/unreachable|not-ready/);
      expect(copies).toMatch(/^none to expect: the slot is OUTBOX_REPLICA_URL's standby's own/);
      expect(await statusRow('replay delay')).toMatch(/^none: OUTBOX_REPLICA_URL is a primary now \(promoted\)/);
      expect(await relay.stop()).toBe(0);
    } finally {
      await relay.kill9();
    }
  });
});
