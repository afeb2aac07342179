import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { expectEveryCommittedEventDelivered, useTestOutbox } from '../harness/fixture.js';
import { serviceAction } from '../harness/control.js';
import { get } from '../harness/http.js';
import { TopicReader } from '../harness/kafka.js';
import { OutboxLoad } from '../harness/load.js';
import { freePort } from '../harness/ports.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';
import { SilentProxy } from '../harness/silent-proxy.js';

/** Postgres ends a walsender that heard nothing from its client for this long (set for these tests). */
const WAL_SENDER_TIMEOUT_S = 10;
const REPLICATION_TIMEOUT_S = 5;

/**
 * Connections that go quiet without closing, the way networks fail: no RST, no FIN, packets
 * stop. The relay must notice by itself, recover, and lose nothing; its liveness probe must say
 * when it cannot make progress; SIGTERM must end it in bounded time whatever the sockets do.
 */
describe('silent connections', () => {
  const { outbox } = useTestOutbox();
  const databaseUrl = new URL(inject('services').databaseUrl);
  let proxy: SilentProxy;
  const relays: RelayProcess[] = [];

  beforeAll(async () => {
    proxy = await new SilentProxy({ host: databaseUrl.hostname, port: Number(databaseUrl.port) }).start();
    await outbox.pool.query(`ALTER SYSTEM SET wal_sender_timeout = '${WAL_SENDER_TIMEOUT_S}s'`);
    await outbox.pool.query('SELECT pg_reload_conf()');
  });
  afterAll(async () => {
    await outbox.pool.query('ALTER SYSTEM RESET wal_sender_timeout');
    await outbox.pool.query('SELECT pg_reload_conf()');
    await proxy.stop();
  });
  afterEach(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.kill9()));
  });

  function startRelay(extra: Record<string, string> = {}): RelayProcess {
    const viaProxy = new URL(databaseUrl);
    viaProxy.port = String(proxy.port);
    const relay = new RelayProcess(outbox.relayEnv({ DATABASE_URL: viaProxy.toString(), OUTBOX_REPLICATION_TIMEOUT: `${REPLICATION_TIMEOUT_S}s`, ...extra })).start();
    relays.push(relay);
    return relay;
  }

  it('notices a silent replication connection, takes the slot back when Postgres lets go, and loses nothing', { timeout: 240_000 }, async () => {
    const relay = startRelay();
    const load = new OutboxLoad(outbox, { writers: 2, rowsPerTransaction: 2, aggregates: 10, pauseMs: 5 }).start();
    let cutAt = 0;
    let firstAfterCut = 0;
    let caughtUp = 0;
    try {
      await relay.waitActive();
      await delay(2_000);
      expect(proxy.silence()).toBeGreaterThan(0);
      cutAt = Date.now();
      const walAtCut = await outbox.currentWalLsn();
      const reader = await new TopicReader().start([outbox.topic('invoice')]);
      try {
        // Events committed from a second after the cut on reach Kafka only through a new
        // replication session.
        await delay(1_000);
        const committedByThen = new Set(await outbox.committedIds());
        await eventually('the relay to notice the silence', async () => (relay.logs.some((line) => line.code === 'SOURCE_TIMEOUT') ? true : undefined), (REPLICATION_TIMEOUT_S + 10) * 1_000);
        firstAfterCut = await eventually('an event committed after the cut to arrive', async () => {
          const ids = new Set(reader.records.map((record) => record.headers.event_id));
          const fresh = (await outbox.committedIds()).filter((id) => !committedByThen.has(id));
          return fresh.some((id) => ids.has(id)) ? Date.now() : undefined;
        }, 120_000, 200);
      } finally {
        await reader.stop();
      }
      await load.stop();
      const end = await outbox.currentWalLsn();
      caughtUp = await eventually('the slot to catch up', async () => ((await outbox.slotState()).confirmed >= end ? Date.now() : undefined), 60_000, 200);
      expect(end).toBeGreaterThan(walAtCut);
    } finally {
      await load.stop();
    }
    await expectEveryCommittedEventDelivered(outbox, () => relay.tail());
    expect(await relay.stop()).toBe(0);
    process.stdout.write(`silent replication connection: first event after the cut delivered in ${firstAfterCut - cutAt} ms, slot caught up ${caughtUp - cutAt} ms after the cut (replication timeout ${REPLICATION_TIMEOUT_S}s, wal_sender_timeout ${WAL_SENDER_TIMEOUT_S}s)\n`);
  });

  it('exits within the shutdown bound on SIGTERM during a silent connection; the next run loses nothing', { timeout: 180_000 }, async () => {
    // Long enough that only a bounded shutdown can end the process in time.
    const relay = startRelay({ OUTBOX_REPLICATION_TIMEOUT: '10m', OUTBOX_SHUTDOWN_TIMEOUT: '5s' });
    const load = new OutboxLoad(outbox, { writers: 2, rowsPerTransaction: 2, aggregates: 10, pauseMs: 5 }).start();
    let exitMs = 0;
    let code: number | null = null;
    try {
      await relay.waitActive();
      await delay(1_500);
      proxy.silence();
      await delay(2_000);
      const signalledAt = Date.now();
      code = await relay.stop(30_000);
      exitMs = Date.now() - signalledAt;
    } finally {
      await load.stop();
    }
    expect(exitMs).toBeLessThan(5_000 + 5_000);
    // Unconfirmed events remain: the exit code says the drain did not complete.
    expect(code, relay.tail(40)).toBe(3);
    // The walsender of the silenced session lets go of the slot after its timeout.
    const next = startRelay();
    await next.waitActive((WAL_SENDER_TIMEOUT_S + 30) * 1_000);
    await expectEveryCommittedEventDelivered(outbox, () => next.tail());
    expect(await next.stop()).toBe(0);
    process.stdout.write(`SIGTERM during a silent connection: exited with ${code} after ${exitMs} ms\n`);
  });

  it('fails its liveness probe while Kafka does not answer, and passes again after it recovers', { timeout: 240_000 }, async () => {
    const port = await freePort();
    const relay = new RelayProcess(outbox.relayEnv({ OUTBOX_HTTP_PORT: String(port), OUTBOX_STALL_TIMEOUT: '5s' })).start();
    relays.push(relay);
    const load = new OutboxLoad(outbox, { writers: 2, rowsPerTransaction: 2, aggregates: 10, pauseMs: 20 }).start();
    try {
      await relay.waitActive();
      await delay(1_000);
      expect((await get(port, '/healthz')).status).toBe(200);
      // A hung broker: its sockets stay open, nothing answers (as a long GC pause or a frozen VM).
      await serviceAction('freeze', 'kafka');
      try {
        const unhealthy = await eventually('/healthz to fail', async () => {
          const response = await get(port, '/healthz');
          return response.status === 503 ? response.body : undefined;
        }, 30_000, 250);
        expect(unhealthy).toMatch(/no progress/);
        await delay(30_000);
      } finally {
        await serviceAction('thaw', 'kafka');
      }
      await eventually('/healthz to pass again', async () => ((await get(port, '/healthz')).status === 200 ? true : undefined), 120_000, 500);
    } finally {
      await load.stop();
    }
    await expectEveryCommittedEventDelivered(outbox, () => relay.tail());
    expect(await relay.stop()).toBe(0);
  });
});
