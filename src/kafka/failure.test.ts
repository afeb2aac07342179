import { describe, expect, it } from 'vitest';
import { kafkaFailure } from './failure.js';

/** A Kafka protocol error as kafkajs raises it: `type` is Kafka's name. */
const protocolError = (type: string) => Object.assign(new Error(`broker said ${type}`), { name: 'KafkaJSProtocolError', type, retriable: false });
const exactlyOnce = { transactionalId: 'outbox-relay.slot' };

describe('kafkaFailure under exactly-once', () => {
  it('a newer producer with the same transactional id: SINK_FENCED, retriable (the session ends, the slot decides who streams)', () => {
    for (const type of ['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH']) {
      const error = kafkaFailure(protocolError(type), 'commit', exactlyOnce);
      expect([error.code, error.retriable]).toEqual(['SINK_FENCED', true]);
      expect(error.message).toMatch(/outbox-relay\.slot/);
    }
  });

  it('a transaction timeout the broker refuses, or a broker without transactions: SINK_EXACTLY_ONCE, naming what to change', () => {
    const timeout = kafkaFailure(protocolError('INVALID_TRANSACTION_TIMEOUT'), 'connect', exactlyOnce);
    expect([timeout.code, timeout.retriable]).toEqual(['SINK_EXACTLY_ONCE', false]);
    expect(timeout.message).toMatch(/OUTBOX_TRANSACTION_TIMEOUT.*transaction\.max\.timeout\.ms/);
    expect(kafkaFailure(protocolError('UNSUPPORTED_VERSION'), 'connect', exactlyOnce).message).toMatch(/needs brokers with transactions/);
  });

  it('a coordinator that is not available names the transaction log settings, and stays retriable', () => {
    const error = kafkaFailure(Object.assign(protocolError('COORDINATOR_NOT_AVAILABLE'), { retriable: true }), 'connect', exactlyOnce);
    expect([error.code, error.retriable]).toEqual(['SINK_PUBLISH', true]);
    expect(error.message).toMatch(/transaction\.state\.log\.replication\.factor/);
  });

  it('at-least-once keeps its own codes: a fenced epoch is not a takeover there', () => {
    expect(kafkaFailure(protocolError('INVALID_PRODUCER_EPOCH'), 'send').code).toBe('SINK_PUBLISH');
  });
});
