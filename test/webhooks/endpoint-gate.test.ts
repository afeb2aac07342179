// vitest: runs alone (its busy-loop child and held event loops would slow a neighbour's timed assertions: first-attempt-later failed beside it)
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { billingEvent, type OutboxRow } from '../harness/outbox.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';
import { useTestWebhooks, WebhookReceiver, type ReceivedRequest } from '../harness/webhooks.js';

const CUSTOMER = 'cus_gate';
/** The pause the throttling endpoint asks for. */
const RETRY_AFTER_S = 2;
/** How long each receiver holds a request before answering: with the event rate, ~50 in flight to the throttling endpoint once a pause ends. */
const ANSWER_MS = 300;

/** An attempt as the store recorded it (a first attempt's in the delivery's first_* columns, the others in attempts). */
interface RecordedAttempt {
  readonly endpoint_id: string;
  readonly started_at: Date;
  readonly latency_ms: number;
  readonly status_code: number | null;
  readonly process: string;
}

/**
 * How long another process may still start a request it leased before the closing reached the
 * store (docs/webhooks.md, the endpoint gate): the answer judged on an event loop held up to
 * 60 ms, the closing's write on a loaded Postgres, and a lease read just before it committed,
 * started on an event loop held as long (2–337 ms seen on 2 cores beside other suites; before
 * the gate, 8–777 ms here and 816–1,543 ms in issue 63).
 */
const OTHER_PROCESS_ALLOWANCE_MS = 500;
/**
 * The receiver's clock: a request reaches its handler this much later than the relay recorded
 * its start (the test's own event loop, on the same loaded cores: up to ~280 ms seen).
 */
const RECEIVER_LAG_MS = 500;

/** A request started after the relay held an answer that closed the gate: how far in, from which process. */
interface Breach {
  readonly intoMs: number;
  readonly sameProcess: boolean;
}

/**
 * The endpoint gate (src/webhooks/endpoint-gate.ts) holds under CPU contention: one endpoint
 * answers 429 Retry-After (or 410) while its own other requests in flight and its customer's
 * other endpoints answer 200 in the same batches, two webhooks processes share the endpoint's
 * limit of 50 in flight, a busy-loop child process takes a core, and each webhooks process's
 * event loop is held for tens of milliseconds at random (the test hook
 * OUTBOX_WEBHOOK_TEST_LOOP_STALLS). Judged from the store's own attempt records: no request to
 * the endpoint starts after the process that held the answer closing its gate held it, until
 * the pause ends (a 410: never), nor from the other process past OTHER_PROCESS_ALLOWANCE_MS;
 * and from the receiver's own request times, none arrives past that allowance.
 */
/**
 * On the two clients the fault was found with (issue 63). The gate is the dispatcher's, after the
 * consumer: a third client changes only how events arrive, and would add two minutes to a file
 * that runs alone.
 */
const GATE_CLIENTS = testKafkaClients().filter((client) => client === 'kafkajs' || client === 'librdkafka');

describe.each(GATE_CLIENTS)('the endpoint gate under CPU contention (consumer on %s)', (kafkaClient) => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const receivers: WebhookReceiver[] = [];
  const processes: RelayProcess[] = [];
  let relay: RelayProcess;
  let hog: ChildProcess | null = null;
  const env = () =>
    webhooks.env({
      OUTBOX_KAFKA_CLIENT: kafkaClient,
      OUTBOX_WEBHOOK_CUSTOMER_FROM: 'header:customer_id',
      OUTBOX_WEBHOOK_TIMEOUT: '5s',
      OUTBOX_WEBHOOK_RETRY_SCHEDULE: '0s,200ms,500ms,1s,2s,5s',
      OUTBOX_WEBHOOK_TEST_LOOP_STALLS: '10-60ms',
    });

  beforeAll(async () => {
    relay = new RelayProcess(outbox.relayEnv()).start();
    await relay.waitActive();
    // A core taken away from the processes under test, beside the stalls of their own loops.
    hog = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  });

  afterAll(async () => {
    hog?.kill('SIGKILL');
    for (const started of processes) await started.stop().catch(() => undefined);
    await relay?.stop();
    await Promise.all(receivers.map((receiver) => receiver.stop()));
  });

  async function endpoint(eventType: string, maxInFlight: number): Promise<{ readonly id: string; readonly receiver: WebhookReceiver }> {
    const receiver = await new WebhookReceiver().start();
    receivers.push(receiver);
    const { id } = await webhooks.addEndpoint(receiver.url(), eventType, ['--customer', CUSTOMER, '--max-in-flight', String(maxInFlight)]);
    return { id, receiver };
  }

  async function twoProcesses(): Promise<void> {
    const started = [new RelayProcess(env(), [], 'webhooks').start(), new RelayProcess(env(), [], 'webhooks').start()];
    processes.push(...started);
    await Promise.all(started.map((one) => one.waitForLog(/consuming and dispatching/)));
  }

  /** `perSecond` events of `eventType` for `seconds`, the customer's, in transactions of a tenth of a second's worth. */
  async function load(eventType: string, perSecond: number, seconds: number): Promise<OutboxRow[]> {
    const rows: OutboxRow[] = [];
    const per = Math.max(1, Math.round(perSecond / 10));
    const started = Date.now();
    for (let tick = 0; tick < seconds * 10; tick += 1) {
      const batch = Array.from({ length: per }, (_, j) => {
        const event = billingEvent(`inv-${(tick * per + j) % 37}`, tick * per + j, eventType);
        return { ...event, headers: { ...event.headers, customer_id: CUSTOMER } };
      });
      await outbox.insert(batch);
      rows.push(...batch);
      await delay(Math.max(0, started + (tick + 1) * 100 - Date.now()));
    }
    return rows;
  }

  async function recordedAttempts(endpointId: string): Promise<RecordedAttempt[]> {
    return webhooks.query<RecordedAttempt>(
      `SELECT d.endpoint_id, a.started_at, a.latency_ms, a.status_code, a.process FROM wh.attempts a JOIN wh.deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1
       UNION ALL
       SELECT d.endpoint_id, d.first_started_at, d.first_latency_ms, d.first_status_code, d.first_process FROM wh.deliveries d WHERE d.endpoint_id = $1 AND d.first_started_at IS NOT NULL`,
      [endpointId],
    );
  }

  /**
   * Attempts that started after the relay held an answer with `status` (its start plus its
   * latency, as recorded), within `windowMs` of it: from the process that held it, any; from
   * the other, after OTHER_PROCESS_ALLOWANCE_MS (those before it are reported apart).
   */
  function breaches(attempts: readonly RecordedAttempt[], status: number, windowMs: number): Breach[] {
    const found: Breach[] = [];
    const closing = attempts.filter((a) => a.status_code === status);
    for (const closer of closing) {
      const held = closer.started_at.getTime() + closer.latency_ms;
      for (const other of attempts) {
        if (other === closer) continue;
        const intoMs = other.started_at.getTime() - held;
        if (intoMs > 0 && intoMs < windowMs) found.push({ intoMs, sameProcess: other.process === closer.process });
      }
    }
    return found;
  }

  /** Requests the receiver got later than the other process's allowance (and its own lag) after one of its closing answers, within `windowMs` of it. */
  function receivedInside(requests: readonly ReceivedRequest[], closedAt: readonly number[], windowMs: number): number[] {
    return requests.flatMap((request) => closedAt.map((at) => request.at - at).filter((intoMs) => intoMs > OTHER_PROCESS_ALLOWANCE_MS + RECEIVER_LAG_MS && intoMs < windowMs));
  }

  function outsideAllowance(breach: Breach): boolean {
    return breach.sameProcess || breach.intoMs > OTHER_PROCESS_ALLOWANCE_MS;
  }

  function summary(found: readonly Breach[]): string {
    const into = found.map((b) => b.intoMs).sort((a, b) => a - b);
    return `${found.length} (same process ${found.filter((b) => b.sameProcess).length}, the other ${found.filter((b) => !b.sameProcess).length}; ${into.length > 0 ? `${into[0]}–${into.at(-1)} ms in` : 'none'})`;
  }

  it(`starts no request inside a Retry-After: ${RETRY_AFTER_S} pause while the endpoint's other requests and its siblings answer 200 in the same batches`, async () => {
    const throttled = await endpoint('invoice.paid', 50);
    const siblings = [await endpoint('invoice.paid', 50), await endpoint('invoice.paid', 50)];
    for (const sibling of siblings) sibling.receiver.answerWith(() => ({ status: 200, delayMs: 20 }));
    /** When the receiver answered each 429 (its own clock): the next comes once the pause ended and the backlog is going out, 50 in flight. */
    const throttledAt: number[] = [];
    let nextThrottle = 0;
    let loading = true;
    throttled.receiver.answerWith(() => {
      const now = Date.now();
      // Once the load ended, the backlog goes out unthrottled.
      if (!loading || now < nextThrottle || throttled.receiver.requests.length < 100) return { status: 200, delayMs: ANSWER_MS };
      nextThrottle = now + RETRY_AFTER_S * 1000 + 400;
      setTimeout(() => throttledAt.push(Date.now()), ANSWER_MS);
      return { status: 429, headers: { 'retry-after': String(RETRY_AFTER_S) }, delayMs: ANSWER_MS };
    });
    await twoProcesses();
    const rows = await load('invoice.paid', 60, 15);
    loading = false;
    await eventually(
      'every event at the throttling endpoint and its siblings',
      async () => ([throttled, ...siblings].every((e) => new Set(e.receiver.ids()).size >= rows.length) ? true : undefined),
      90_000,
      500,
    );
    const attempts = await recordedAttempts(throttled.id);
    const throttles = attempts.filter((a) => a.status_code === 429).length;
    const all = breaches(attempts, 429, RETRY_AFTER_S * 1000);
    const found = all.filter(outsideAllowance);
    const atReceiver = receivedInside(throttled.receiver.requests, throttledAt, RETRY_AFTER_S * 1000);
    console.log(`[${kafkaClient}] 429 rounds: ${throttles}, attempts to the endpoint: ${attempts.length}, most in flight at it: ${throttled.receiver.mostInFlight}; started inside a pause (store): ${summary(all)}, beyond the other process's allowance: ${found.length}; at the receiver >${OTHER_PROCESS_ALLOWANCE_MS + RECEIVER_LAG_MS} ms into a pause: ${atReceiver.length}`);
    expect(throttles).toBeGreaterThanOrEqual(4);
    expect(throttled.receiver.mostInFlight).toBeGreaterThanOrEqual(40);
    expect(found, `requests started inside a pause: ${summary(found)}`).toEqual([]);
    expect(atReceiver, 'requests the receiver got inside a pause (ms into it)').toEqual([]);
  });

  it('starts no request to an endpoint after the relay held its 410 Gone, while its other requests in flight and its siblings answer 200', async () => {
    const gone = [await endpoint('invoice.voided', 50), await endpoint('invoice.voided', 50), await endpoint('invoice.voided', 50)];
    const sibling = await endpoint('invoice.voided', 50);
    sibling.receiver.answerWith(() => ({ status: 200, delayMs: 20 }));
    const goneAt = new Map<WebhookReceiver, number>();
    gone.forEach(({ receiver }, i) =>
      receiver.answerWith((_request, index) => {
        // Each gone at its own time, with 50 requests in flight to it.
        if (index !== 150 + i * 100) return { status: 200, delayMs: ANSWER_MS };
        setTimeout(() => goneAt.set(receiver, Date.now()), ANSWER_MS);
        return { status: 410, delayMs: ANSWER_MS };
      }),
    );
    const rows = await load('invoice.voided', 150, 6);
    await eventually('every event at the sibling', async () => (new Set(sibling.receiver.ids()).size >= rows.length ? true : undefined), 90_000, 500);
    await delay(1_000);
    const all: Breach[] = [];
    let atReceiver = 0;
    for (const { id, receiver } of gone) {
      const attempts = await recordedAttempts(id);
      expect(attempts.filter((a) => a.status_code === 410)).toHaveLength(1);
      all.push(...breaches(attempts, 410, Infinity));
      atReceiver += receivedInside(receiver.requests, [goneAt.get(receiver)!], Infinity).length;
    }
    const found = all.filter(outsideAllowance);
    console.log(`[${kafkaClient}] 410s: ${gone.length}, most in flight: ${gone.map((e) => e.receiver.mostInFlight).join(', ')}; started after a 410 (store): ${summary(all)}, beyond the other process's allowance: ${found.length}; at the receiver >${OTHER_PROCESS_ALLOWANCE_MS + RECEIVER_LAG_MS} ms after: ${atReceiver}`);
    expect(Math.min(...gone.map((e) => e.receiver.mostInFlight))).toBeGreaterThanOrEqual(40);
    expect(found, `requests started after a 410: ${summary(found)}`).toEqual([]);
    expect(atReceiver).toBe(0);
  });
});
