// vitest: runs alone (it bounds request counts by a linger time)
import { afterEach, describe, expect, it } from 'vitest';
import { createTopics } from '../harness/kafka.js';
import { get, metric } from '../harness/http.js';
import { billingEvent, TestOutbox } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

const EVENTS = 20;

/**
 * Commits EVENTS single-row transactions ~10 ms apart through a relay with the given linger;
 * returns how many produce requests carried them, once all are published.
 */
async function requestsFor(linger: string, cleanup: (fn: () => Promise<void>) => void): Promise<number> {
  const outbox = new TestOutbox();
  await outbox.create();
  await createTopics([outbox.topic('invoice')]);
  const port = await freePort();
  const relay = new RelayProcess(outbox.relayEnv({ OUTBOX_HTTP_PORT: String(port), OUTBOX_LINGER: linger })).start();
  cleanup(async () => {
    await relay.stop();
    await outbox.destroy();
  });
  await relay.waitActive();
  for (let i = 0; i < EVENTS; i++) {
    await outbox.insert([billingEvent('inv_linger', i)]);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const scrape = async () => (await get(port, '/metrics')).body;
  const body = await eventually('every event published', async () => {
    const text = await scrape();
    return metric(text, 'outbox_relay_events_published_total') === EVENTS ? text : undefined;
  });
  return metric(body, 'outbox_relay_produce_requests_total');
}

describe('producer linger', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it('gathers a steady trickle of events into few produce requests; without it, nearly one request per event', async () => {
    const lingering = await requestsFor('400ms', (fn) => cleanups.push(fn));
    const immediate = await requestsFor('0', (fn) => cleanups.push(fn));
    console.log(`linger: ${EVENTS} events in ${lingering} produce requests with 400ms, ${immediate} with 0`);
    expect(lingering).toBeGreaterThanOrEqual(1);
    expect(lingering).toBeLessThanOrEqual(4);
    expect(immediate).toBeGreaterThanOrEqual(EVENTS / 2);
  });
});
