// vitest: runs alone (the failover pair's fixed ports, which replica-source.test.ts starts too)
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLsn } from '../../src/lsn.js';
import { databaseAccess } from '../../src/pg-connection.js';
import { setup } from '../../src/setup/setup.js';
import { useFailoverPair } from '../harness/failover-pair.js';
import { expectEveryCommittedEventDelivered, expectOrderPerAggregate } from '../harness/fixture.js';
import { get, metric } from '../harness/http.js';
import { createTopics, TopicReader } from '../harness/kafka.js';
import { OutboxLoad } from '../harness/load.js';
import { TestOutbox } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';
import { TestWebhooks, WebhookReceiver } from '../harness/webhooks.js';

/**
 * Issue 15 (d): a Postgres 17 primary with a physical standby that synchronizes the relay's
 * failover slot (scripts/stack/pg-embedded.sh: sync_replication_slots, hot_standby_feedback,
 * synchronized_standby_slots, and a synchronous standby so that every COMMIT a writer saw
 * returned is on it). The relay runs with both hosts in DATABASE_URL. Under load the primary
 * is killed -9 and the standby promoted: the relay reconnects to the new primary by itself,
 * streams on from the synchronized slot, and every event committed there reaches Kafka —
 * nothing else, and nothing needs `recover`. The webhooks process keeps its delivery store on the
 * same pair (both hosts in its DATABASE_URL): it rides through the promotion too, and every event
 * reaches the customer's endpoint.
 */
describe('Postgres 17 failover: the relay follows a promotion', () => {
  const pair = useFailoverPair();
  let outbox: TestOutbox;
  let webhooks: TestWebhooks;

  beforeAll(async () => {
    outbox = new TestOutbox({ databaseUrl: pair.databaseUrl, sqlUrl: pair.primaryUrl });
    // setup through the two-host URL: it finds the primary, and makes a failover slot there.
    const done = await setup({ database: databaseAccess(outbox.databaseUrl), outboxes: [{ table: { schema: 'public', name: outbox.table } }], publication: outbox.publication, slot: outbox.slot });
    expect(done.lines).toContain(`synchronized_standby_slots = 'outbox_standby': the relay is sent only what those standbys have`);
    expect(done.lines.find((line) => line.startsWith(`slot ${outbox.slot}: created`))).toMatch(/a failover slot: standbys with sync_replication_slots keep a copy/);
    await createTopics([outbox.topic('invoice')]);
    // `webhooks setup` and `endpoint add` through the two-host URL too: they find the primary.
    webhooks = new TestWebhooks(outbox);
    await webhooks.setup();
  });

  afterAll(async () => {
    await outbox.pool.end().catch(() => undefined);
  });

  it('kills the primary under load, promotes the standby: the relay streams on from the synced slot and every committed event arrives', { timeout: 300_000 }, async () => {
    const port = await freePort();
    const relay = new RelayProcess(outbox.relayEnv({ OUTBOX_HTTP_PORT: String(port), OUTBOX_SLOT_POLL_INTERVAL: '500ms', OUTBOX_RECONNECT_MAX: '1s' })).start();
    const load = new OutboxLoad(outbox, { writers: 3, rowsPerTransaction: 2, aggregates: 15, pauseMs: 3, rollbackEvery: 20 }).start();
    const reader = await new TopicReader().start([outbox.topic('invoice')]);
    const receiver = await new WebhookReceiver().start();
    // --deliver-from all: the relay and the load start before this, and an endpoint is owed by
    // default only the events produced once it was added: the first of each partition would be
    // owed to nobody, their offsets committed with nothing recorded. --max-in-flight: room for the
    // backlog the webhooks process starts on (below) to drain within the wait: one endpoint takes
    // at most max_in_flight requests at once, each round a claim, the requests and their results'
    // write (~50 ms here): the default 10 is ~200 deliveries a second at best, less than the
    // load's ~350 events a second, so the backlog would only grow.
    await webhooks.addEndpoint(receiver.url(), 'invoice.paid', ['--deliver-from', 'all', '--max-in-flight', '100']);
    const webhooksPort = await freePort();
    const dispatcher = new RelayProcess(webhooks.env({ OUTBOX_HTTP_PORT: String(webhooksPort) }), [], 'webhooks');
    try {
      await relay.waitActive();
      // The standby's copy is usable once it is synced and no longer temporary: the primary's
      // slot had to move past the point where the standby's copy began (the relay confirming).
      const standby = new pg.Client({ connectionString: pair.standbyUrl });
      await standby.connect();
      const syncedAfterMs = await timed(() =>
        eventually('the standby to hold a synchronized copy of the slot', async () => {
          const { rows } = await standby.query<{ ready: boolean }>('SELECT synced AND NOT temporary AND invalidation_reason IS NULL AS ready FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot]);
          return rows[0]?.ready ? true : undefined;
        }, 120_000, 250),
      );
      await standby.end();
      // The relay sees it too: it asks the other host of DATABASE_URL.
      await eventually('the relay to count the standby copy', async () => {
        const { body } = await get(port, '/metrics');
        return metric(body, 'outbox_relay_slot_failover') === 1 && metric(body, 'outbox_relay_slot_synced_standbys') === 1 ? true : undefined;
      }, 30_000, 250);
      // The webhooks process starts now, on the backlog the load made meanwhile: the primary
      // dies while it is recording and sending its first batches (as a failover finds a busy one).
      dispatcher.start();
      await dispatcher.waitForLog(/webhooks: consuming and dispatching/);
      await delay(3_000);

      const beforeKill = load.committedTransactions;
      await pair.node('kill', 'primary');
      const killedAt = Date.now();
      // A failover manager's detection time; meanwhile the relay finds no primary and retries.
      await delay(2_000);
      await pair.promote();
      const promotedAt = Date.now();
      outbox.useServer(pair.standbyUrl);
      const promotionLsn = await walLsn(outbox);

      // First event delivered from the new primary: the first record committed there (its
      // commit LSN is past the promotion) that a consumer reads.
      const firstNew = await eventually('an event committed on the new primary to arrive', async () => {
        const found = reader.records.find((record) => parseLsn(record.headers.outbox_commit_lsn ?? '0/0') >= promotionLsn);
        return found ? Date.now() : undefined;
      }, 60_000, 20).catch((error: unknown) => {
        // Which side stalled: the writers (nothing committed there) or the relay (its log).
        throw new Error(`${(error as Error).message}; ${load.committedTransactions - beforeKill} transactions committed since the kill, ${reader.records.length} records read\n${relay.tail()}`);
      });
      const resumed = relay.logs.find((line) => /^active:/.test(line.msg) && typeof line.time === 'number' && line.time >= promotedAt);
      await delay(5_000);
      await load.stop();

      const afterPromotion = load.committedTransactions - beforeKill;
      expect(afterPromotion, 'writers committed on the new primary').toBeGreaterThan(50);
      // The relay looked for a primary while there was none, and said so.
      expect(relay.logs.some((line) => line.code === 'SOURCE_NO_PRIMARY' && /a standby \(in recovery\)/.test(String(line.err))), relay.tail()).toBe(true);
      // Synchronous standby: every COMMIT that returned to a writer is on the new primary.
      const onNewPrimary = new Set(await outbox.committedIds());
      expect(load.acknowledgedIds.filter((id) => !onNewPrimary.has(id))).toEqual([]);
      // Every event on the new primary delivered, and nothing else (no event of a transaction
      // the old primary took with it): expectEveryCommittedEventDelivered reads the new primary.
      const records = await expectEveryCommittedEventDelivered(outbox, () => relay.tail());
      const delivered = new Set(records.map((record) => record.headers.event_id));
      expect(load.rolledBackIds.filter((id) => delivered.has(id))).toEqual([]);
      expectOrderPerAggregate(records);
      // The slot on the new primary is the synchronized copy, streamed from: no recover.
      const slot = await outbox.slotState();
      expect(slot.confirmed).toBeGreaterThanOrEqual(promotionLsn);
      expect(relay.logs.some((line) => line.code === 'SOURCE_SLOT_MISSING')).toBe(false);
      expect(await relay.stop()).toBe(0);

      // The webhooks process stayed up through the promotion, found the new primary for its
      // store, and every event reached the endpoint (a repeat is the same webhook-id).
      /** Where the events not at the endpoint are: in the store (by delivery status) or not, and at which offsets. */
      const undelivered = async (): Promise<string> => {
        const received = new Set(receiver.ids());
        const missing = new Set([...onNewPrimary].filter((id) => !received.has(id)));
        const deliveries = await webhooks.query<{ status: string; count: number; due: string | null }>('SELECT status, count(*)::int AS count, max(next_attempt_at)::text AS due FROM wh.deliveries GROUP BY status');
        const stored = await webhooks.query<{ stored: number }>('SELECT count(*)::int AS stored FROM wh.events WHERE event_id = ANY($1::text[])', [[...missing]]);
        const offsets = new Map<number, number[]>();
        for (const record of reader.records) {
          if (!missing.has(record.headers.event_id ?? '')) continue;
          const list = offsets.get(record.partition) ?? [];
          list.push(Number(record.offset));
          offsets.set(record.partition, list);
        }
        const ranges = [...offsets].map(([partition, list]) => `p${partition}: ${list.length} at ${Math.min(...list)}..${Math.max(...list)}`).join(', ');
        const consumerLines = dispatcher.logs.filter((line) => /consumer failed|consuming|membership|rejoin|group/i.test(String(line.msg))).map((line) => `${new Date(Number(line.time)).toISOString()} ${line.msg} ${line.err ?? ''}`).join('\n');
        const ready = (await get(webhooksPort, '/readyz').catch(() => ({ status: 0 }))).status;
        return `${missing.size} of ${onNewPrimary.size} events not at the endpoint (${stored[0]!.stored} of them in the store; ${ranges}; killed at ${new Date(killedAt).toISOString()}, promoted at ${new Date(promotedAt).toISOString()}; readyz ${ready}); deliveries by status: ${JSON.stringify(deliveries)}; consumer lines:\n${consumerLines}\nthe webhooks process's log:\n${dispatcher.tail(30)}`;
      };
      await eventually('every event at the webhook endpoint', async () => {
        if (!dispatcher.alive) throw new Error(`the webhooks process exited:\n${dispatcher.tail()}`);
        const received = new Set(receiver.ids());
        return [...onNewPrimary].every((id) => received.has(id)) ? true : undefined;
      }, 90_000, 250).catch(async (error: unknown) => {
        // Described once, at the timeout, not at every poll: the receiver answers on this
        // process's event loop, and a description per poll (a second each, with 20,000 events
        // missing) held its answers up, and so the very deliveries waited for.
        throw new Error(`${(error as Error).message}: ${await undelivered()}`);
      });
      const allAtEndpointMs = Date.now() - promotedAt;
      await eventually('the webhooks process ready again', async () => ((await get(webhooksPort, '/readyz')).status === 200 ? true : undefined), 30_000, 250);
      expect(await dispatcher.stop()).toBe(0);

      const figures = {
        committed: onNewPrimary.size,
        delivered: delivered.size,
        duplicates: records.length - delivered.size,
        syncedAfterMs,
        killToPromotionMs: promotedAt - killedAt,
        promotionToStreamingMs: resumed ? Number(resumed.time) - promotedAt : null,
        promotionToFirstNewEventMs: firstNew - promotedAt,
        webhookRequests: receiver.requests.length,
        webhooksAllAtEndpointMs: allAtEndpointMs,
      };
      process.stdout.write(`failover: ${JSON.stringify(figures)}\n`);
    } finally {
      await load.stop();
      await reader.stop();
      await relay.kill9();
      await dispatcher.kill9();
      await receiver.stop();
    }
  });
});

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = Date.now();
  await work();
  return Date.now() - started;
}

async function walLsn(outbox: TestOutbox): Promise<bigint> {
  return eventually('the new primary to answer', () => outbox.currentWalLsn(), 30_000, 100);
}
