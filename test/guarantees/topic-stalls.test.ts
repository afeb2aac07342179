import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { kafkaClient } from '../harness/kafka.js';
import { billingEvent } from '../harness/outbox.js';
import { RelayProcess } from '../harness/relay-process.js';

/**
 * A topic that cannot take an event must not stall the stream in a silent loop: the event goes
 * to the dead-letter topic with a reason naming the topic, the events behind it flow.
 */
describe('topics that cannot take an event', () => {
  const { outbox, reader } = useTestOutbox({ deadLetters: true, read: true });

  it('dead-letters an event for a missing topic when auto-creation is off, and the stream goes on', async () => {
    const relay = new RelayProcess(outbox.relayEnv({ OUTBOX_KAFKA_AUTO_CREATE_TOPICS: 'false' })).start();
    try {
      await relay.waitActive();
      const before = billingEvent('inv_s', 1);
      const orphan = { ...billingEvent('ref_s', 1, 'refund.issued'), aggregateType: 'refund' };
      const after = billingEvent('inv_s', 2);
      await outbox.insert([before, orphan, after]);
      await reader.until('both invoices and the dead letter', (records) => [before, orphan, after].every(({ eventId }) => records.some((record) => record.headers.event_id === eventId)), 30_000, () => relay.tail());
      const dead = reader.records.find((record) => record.topic === outbox.deadLetterTopic)!;
      expect(dead.headers.dead_letter_code).toBe('SINK_TOPIC_MISSING');
      expect(dead.headers.dead_letter_reason).toContain(`topic "${outbox.topic('refund')}" does not exist`);
      expect(relay.logs.some((line) => /stream interrupted/.test(line.msg))).toBe(false);
    } finally {
      await relay.stop();
    }
  });

  it("dead-letters a record larger than its topic's max.message.bytes, naming the topic; the others flow", async () => {
    const small = outbox.topic('receipt');
    const admin = kafkaClient().admin();
    await admin.connect();
    try {
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic: small, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'max.message.bytes', value: '50000' }] }] });
    } finally {
      await admin.disconnect();
    }
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      const big = { ...billingEvent('rcp_1', 1, 'receipt.issued'), aggregateType: 'receipt', payload: { pdf: 'x'.repeat(200_000) } };
      const fine = { ...billingEvent('rcp_1', 2, 'receipt.issued'), aggregateType: 'receipt', eventId: randomUUID() };
      const invoice = billingEvent('inv_s', 3);
      await outbox.insert([big, fine, invoice]);
      await reader.until('the invoice and the dead letter', (records) => [big, invoice].every(({ eventId }) => records.some((record) => record.headers.event_id === eventId)), 30_000, () => relay.tail());
      const dead = reader.records.find((record) => record.headers.event_id === big.eventId)!;
      expect(dead.topic).toBe(outbox.deadLetterTopic);
      expect(dead.headers.dead_letter_code).toBe('SINK_TOO_LARGE');
      expect(dead.headers.dead_letter_reason).toMatch(new RegExp(`topic ${small}'s max.message.bytes \\(50000\\)`));
      expect(relay.logs.some((line) => /stream interrupted/.test(line.msg))).toBe(false);
    } finally {
      await relay.stop();
    }
  });
});
