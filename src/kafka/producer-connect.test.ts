import { describe, expect, it } from 'vitest';
import { connectProducer, type ProducerConnection } from './producer-connect.js';

const exactlyOnce = { transactionalId: 'outbox-relay-slot', transactionTimeoutMs: 60_000, progress: { topic: 'outbox-relay.progress', key: 'slot', value: () => '' } };

/** The steps a client would take, recorded; `failing` names the one that throws. */
function recording(failing?: string): { log: string[]; topics: { prepareProgressTopic(topic: string): Promise<void> }; client: ProducerConnection } {
  const log: string[] = [];
  const step = (name: string) => async () => {
    log.push(name);
    if (name === failing) throw Object.assign(new Error(`${name} failed`), { type: 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED' });
  };
  return { log, topics: { prepareProgressTopic: async (topic) => step(`prepare ${topic}`)() }, client: { connect: step('connect'), fence: step('fence') } };
}

describe("a producer's connect (both clients)", () => {
  it('exactly-once: the progress topic made ready, then the connection, then the fencing', async () => {
    const { log, topics, client } = recording();
    await connectProducer({ brokers: ['k1:9092'], exactlyOnce }, topics, client);
    expect(log).toEqual(['prepare outbox-relay.progress', 'connect', 'fence']);
  });

  it('at-least-once: the connection alone', async () => {
    const { log, topics, client } = recording();
    await connectProducer({ brokers: ['k1:9092'], exactlyOnce: null }, topics, client);
    expect(log).toEqual(['connect']);
  });

  it("a step that fails stops the rest, and is the relay's error naming the brokers and, for exactly-once, the transactional id", async () => {
    const { log, topics, client } = recording('fence');
    await expect(connectProducer({ brokers: ['k1:9092', 'k2:9092'], exactlyOnce }, topics, client)).rejects.toThrow(
      expect.objectContaining({ code: 'SINK_NOT_AUTHORIZED', message: expect.stringMatching(/^cannot connect to Kafka at k1:9092,k2:9092: .*transactional id outbox-relay-slot/) }),
    );
    expect(log).toEqual(['prepare outbox-relay.progress', 'connect', 'fence']);
  });
});
