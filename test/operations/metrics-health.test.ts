import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceAction } from '../harness/control.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { get, metric } from '../harness/http.js';
import { freePort } from '../harness/ports.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

describe('metrics and health endpoints of a running relay', () => {
  const { outbox } = useTestOutbox({ deadLetters: true });
  let port: number;
  let relay: RelayProcess;

  beforeAll(async () => {
    port = await freePort();
    relay = new RelayProcess(outbox.relayEnv({ OUTBOX_HTTP_PORT: String(port), OUTBOX_SLOT_POLL_INTERVAL: '300ms' })).start();
    await relay.waitActive();
  });

  afterAll(async () => {
    await serviceAction('start', 'kafka');
    await serviceAction('start', 'pg');
    await relay.stop();
  });

  it('reports active and standby as ready and live', async () => {
    expect(await get(port, '/healthz')).toEqual({ status: 200, body: 'active\n' });
    expect(await get(port, '/readyz')).toEqual({ status: 200, body: 'active\n' });
    const standbyPort = await freePort();
    const standby = new RelayProcess(outbox.relayEnv({ OUTBOX_HTTP_PORT: String(standbyPort) })).start();
    try {
      await standby.waitForLog(/^standby/);
      expect(await get(standbyPort, '/readyz')).toEqual({ status: 200, body: 'standby\n' });
      // A standby has no work of its own: never stalled, so never restarted for it.
      expect(await get(standbyPort, '/healthz')).toEqual({ status: 200, body: 'standby\n' });
      expect(metric((await get(standbyPort, '/metrics')).body, 'outbox_relay_state', 'state="standby"')).toBe(1);
    } finally {
      await standby.stop();
    }
  });

  it('counts published and dead-lettered events', async () => {
    await outbox.insert(Array.from({ length: 10 }, (_, i) => billingEvent('inv_m', i)));
    await outbox.insert([{ ...billingEvent('inv_m', 11), aggregateType: 'no such topic!' }]);
    await eventually('the counters', async () => {
      const body = (await get(port, '/metrics')).body;
      return metric(body, 'outbox_relay_events_published_total', 'event_type="invoice.paid"') >= 10 &&
        metric(body, 'outbox_relay_events_dead_lettered_total', 'reason="ROUTE_BAD_TOPIC"') === 1
        ? true
        : undefined;
    });
    const body = (await get(port, '/metrics')).body;
    expect(metric(body, 'outbox_relay_slot_active')).toBe(1);
    expect(metric(body, 'outbox_relay_slot_wal_status', 'status="reserved"')).toBe(1);
    expect(metric(body, 'outbox_relay_commit_to_ack_seconds_count')).toBeGreaterThanOrEqual(11);
    expect(body).toContain('process_resident_memory_bytes');
  });

  it('shows slot lag rising while Kafka is down and falling when it returns', async () => {
    const lag = async () => metric((await get(port, '/metrics')).body, 'outbox_relay_slot_lag_bytes');
    await eventually('a caught-up slot', async () => ((await lag()) < 64 * 1024 ? true : undefined));
    await serviceAction('stop', 'kafka');
    for (let i = 0; i < 20; i += 1) await outbox.insert(Array.from({ length: 20 }, (_, j) => billingEvent(`inv_lag_${j}`, i)));
    const risen = await eventually('slot lag to rise', async () => {
      const value = await lag();
      return value > 100_000 ? value : undefined;
    });
    await serviceAction('start', 'kafka');
    await eventually('slot lag to fall back', async () => ((await lag()) < risen / 4 ? true : undefined), 90_000);
  });

  it('reports not ready while Postgres is unreachable, and ready again after', async () => {
    await serviceAction('stop', 'pg');
    await eventually('readyz 503', async () => ((await get(port, '/readyz')).status === 503 ? true : undefined));
    await serviceAction('start', 'pg');
    await eventually('readyz 200', async () => ((await get(port, '/readyz')).status === 200 ? true : undefined), 60_000);
    expect(metric((await get(port, '/metrics')).body, 'outbox_relay_reconnects_total')).toBeGreaterThanOrEqual(1);
  });
});
