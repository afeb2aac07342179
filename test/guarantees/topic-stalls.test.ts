import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { createTopicsOn, kafkaClient, TopicReader } from '../harness/kafka.js';
import { billingEvent, TestOutbox } from '../harness/outbox.js';
import { OwnBroker } from '../harness/own-broker.js';
import { RelayProcess } from '../harness/relay-process.js';
import { testKafkaClients } from '../harness/kafka-clients.js';

/**
 * Two invoices around a refund whose topic does not exist, inserted while `relay` streams; waits
 * until all three are read (the refund as a dead letter) and returns them.
 */
async function invoicesAroundAnOrphan(outbox: TestOutbox, reader: TopicReader, relay: RelayProcess, aggregateId: string) {
  const before = billingEvent(`inv_${aggregateId}`, 1);
  const orphan = { ...billingEvent(`ref_${aggregateId}`, 1, 'refund.issued'), aggregateType: 'refund' };
  const after = billingEvent(`inv_${aggregateId}`, 2);
  await outbox.insert([before, orphan, after]);
  await reader.until('both invoices and the dead letter', (records) => [before, orphan, after].every(({ eventId }) => records.some((record) => record.headers.event_id === eventId)), 30_000, () => relay.tail());
  return { before, orphan, after, dead: reader.records.find((record) => record.headers.event_id === orphan.eventId)! };
}

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
      const { dead } = await invoicesAroundAnOrphan(outbox, reader, relay, 's');
      expect(dead.topic).toBe(outbox.deadLetterTopic);
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

/**
 * Managed Kafka services create no topic on a producer's first record (auto.create.topics.enable
 * false). With OUTBOX_KAFKA_AUTO_CREATE_TOPICS at its default, an event for a topic that does not
 * exist must still be a dead letter naming the topic and the broker's setting, and the topics that
 * exist must keep flowing: not a stream restarting for ever on "This server does not host this
 * topic-partition".
 */
describe('a broker that creates no topics, OUTBOX_KAFKA_AUTO_CREATE_TOPICS left at its default', () => {
  const broker = new OwnBroker({ autoCreateTopics: false });
  const outbox = new TestOutbox();
  beforeAll(async () => {
    await broker.start();
    await outbox.create();
    await createTopicsOn(broker.brokers, [outbox.topic('invoice'), outbox.deadLetterTopic]);
  });
  afterAll(async () => {
    await outbox.destroy();
    await broker.stop();
  });

  // Each client reads the brokers' setting its own way (kafkajs's admin, librdkafka's with the DescribeConfigs scripts/librdkafka.sh adds).
  it.each(testKafkaClients())('dead-letters the missing topic\'s events, naming it and the broker setting; the other topics flow (%s)', async (client) => {
    const reader = await new TopicReader(broker.brokers).start([outbox.topic('invoice'), outbox.deadLetterTopic]);
    const relay = new RelayProcess(outbox.relayEnv({ KAFKA_BROKERS: broker.brokers, OUTBOX_KAFKA_CLIENT: client })).start();
    try {
      await relay.waitActive();
      const { before, after, dead } = await invoicesAroundAnOrphan(outbox, reader, relay, `m_${client}`);
      expect(dead.topic).toBe(outbox.deadLetterTopic);
      expect(dead.headers.dead_letter_code).toBe('SINK_TOPIC_MISSING');
      expect(dead.headers.dead_letter_reason).toContain(`topic "${outbox.topic('refund')}" does not exist and the brokers do not create topics (auto.create.topics.enable=false)`);
      expect(reader.records.filter((record) => record.topic === outbox.topic('invoice') && record.key === before.aggregateId).map((record) => record.headers.event_id)).toEqual([before.eventId, after.eventId]);
      expect(relay.logs.some((line) => /stream interrupted/.test(line.msg)), relay.tail()).toBe(false);
    } finally {
      await relay.stop();
      await reader.stop();
    }
  });
});
