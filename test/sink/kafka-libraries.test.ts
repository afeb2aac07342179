import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { billingEvent } from '../harness/outbox.js';
import { RelayProcess } from '../harness/relay-process.js';

/**
 * Preloaded into the relay (NODE_OPTIONS=--require): as the process exits, one JSON log line says
 * which Kafka client libraries it loaded. kafkajs and the binding are CommonJS packages loaded
 * through require, so the module cache holds every file of either that was loaded;
 * @platformatic/kafka is ESM, seen by a resolve hook (module.registerHooks, Node 23.5 and later).
 */
const REPORT_LOADED_LIBRARIES = `let platformatic = false;
require('node:module').registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    if (resolved.url.includes('/node_modules/@platformatic/kafka/')) platformatic = true;
    return resolved;
  },
});
process.on('exit', () => {
  const files = Object.keys(require.cache);
  const loaded = (name) => files.some((file) => file.includes('/node_modules/' + name + '/'));
  process.stdout.write(JSON.stringify({ level: 30, msg: 'Kafka libraries loaded', kafkajs: loaded('kafkajs'), librdkafka: loaded('@confluentinc/kafka-javascript'), platformatic }) + '\\n');
});
`;

describe.each(testKafkaClients())('a relay on %s', (client) => {
  const { outbox, reader } = useTestOutbox({ read: true });

  it('loads that client library and not the others', async () => {
    const preload = path.join(mkdtempSync(path.join(tmpdir(), 'kafka-libraries-')), 'report.cjs');
    writeFileSync(preload, REPORT_LOADED_LIBRARIES);
    const relay = new RelayProcess(outbox.relayEnv({ OUTBOX_KAFKA_CLIENT: client, NODE_OPTIONS: `--require ${preload}` })).start();
    try {
      await relay.waitActive();
      const event = billingEvent(`inv_${client}`, 1);
      await outbox.insert([event]);
      await reader.until('the event', (records) => records.some((record) => record.headers.event_id === event.eventId), 30_000, () => relay.tail());
    } finally {
      await relay.stop();
    }
    const report = relay.logs.find((line) => line.msg === 'Kafka libraries loaded');
    expect(report, relay.tail()).toMatchObject({ kafkajs: client === 'kafkajs', librdkafka: client === 'librdkafka', platformatic: client === 'platformatic' });
  });
});
