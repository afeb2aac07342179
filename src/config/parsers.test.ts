import { describe, expect, it } from 'vitest';
import { brokers } from './parsers.js';

describe('KAFKA_BROKERS', () => {
  it('takes host:port pairs: names, IPv4 and bracketed IPv6 addresses', () => {
    expect(brokers.parse(' kafka-1:9092, 10.0.0.7:9093 ,[::1]:9094')).toEqual(['kafka-1:9092', '10.0.0.7:9093', '[::1]:9094']);
  });

  it('refuses a broker without its port (kafkajs would retry it for ever), or with one out of range', () => {
    expect(() => brokers.parse('kafka-1:9092,127.0.0.1')).toThrow('has "127.0.0.1", which is not host:port (no port)');
    expect(() => brokers.parse('PLAINTEXT://kafka:9092')).toThrow('has "PLAINTEXT://kafka:9092", which is not host:port');
    expect(() => brokers.parse('::1')).toThrow('which is not host:port');
    expect(() => brokers.parse('kafka:0')).toThrow('whose port is not from 1 to 65535');
    expect(() => brokers.parse('kafka:70000')).toThrow('whose port is not from 1 to 65535');
    expect(() => brokers.parse(' , ')).toThrow('is empty');
  });
});
