// vitest: runs alone (the failover pair's fixed ports, which failover.test.ts and replica-source.test.ts start too)
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseAccess } from '../../src/pg-connection.js';
import { setup } from '../../src/setup/setup.js';
import { cli } from '../harness/cli.js';
import { useFailoverPair } from '../harness/failover-pair.js';
import { get, metric } from '../harness/http.js';
import { createTopics } from '../harness/kafka.js';
import { TestOutbox } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * Issue 62, fault 5: what an operator sees of a slot on a physical standby
 * (OUTBOX_REPLICA_URL), on Postgres 17, whose standby also synchronizes failover slots.
 * - The slot's own server is never its own "standby copy", before or after its promotion, and
 *   the slot-sync alert's metrics stay quiet: a standby's slot is no failover slot, it stays
 *   through that standby's promotion.
 */
describe('the slot on a Postgres 17 standby, as an operator sees it', () => {
  const pair = useFailoverPair(17);
  let outbox: TestOutbox;
  let standby: pg.Client;

  const relayEnv = (extra: Record<string, string> = {}) => outbox.relayEnv({ OUTBOX_REPLICA_URL: pair.standbyUrl, OUTBOX_SLOT_POLL_INTERVAL: '300ms', ...extra });
  const metrics = async (port: number) => (await get(port, '/metrics')).body;
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
      expect(before).toEqual({ failover: 0, syncedStandbys: -1, onStandby: 1 });
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
      expect(after).toEqual({ failover: 0, syncedStandbys: -1, onStandby: 0 });
      const copies = await statusRow('standby copies');
      expect(copies).not.toMatch(/unreachable|not-ready/);
      expect(copies).toMatch(/^none to expect: the slot is OUTBOX_REPLICA_URL's standby's own/);
      expect(await relay.stop()).toBe(0);
    } finally {
      await relay.kill9();
    }
  });
});
