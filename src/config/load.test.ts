import { describe, expect, it } from 'vitest';
import { loadConfig, redactedConfig } from './load.js';

const required = { DATABASE_URL: 'postgres://relay:s3cret@db:5432/billing', KAFKA_BROKERS: 'k1:9092, k2:9092' };

describe('loadConfig', () => {
  it('applies defaults and compiles durations and lists', () => {
    const config = loadConfig({ env: { ...required, OUTBOX_STATUS_INTERVAL: '2.5s' } });
    expect(config.kafkaBrokers).toEqual(['k1:9092', 'k2:9092']);
    expect(config.statusInterval).toBe(2500);
    expect(config.table).toEqual({ schema: 'public', name: 'event_outbox' });
    expect(config.onPoison).toBe('dead-letter');
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('lets flags win over the environment', () => {
    const config = loadConfig({ env: { ...required, OUTBOX_TABLE: 'a' }, flags: { table: 'billing.outbox', 'on-poison': 'fail' } });
    expect(config.table).toEqual({ schema: 'billing', name: 'outbox' });
    expect(config.onPoison).toBe('fail');
  });

  it('reports every problem at once, naming the variable and what was expected', () => {
    let message = '';
    try {
      loadConfig({ env: { KAFKA_BROKERS: 'k:9092', OUTBOX_ON_POISON: 'ignore', OUTBOX_STATUS_INTERVAL: 'soon', OUTBOX_SLOT: 'my-slot' } });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/DATABASE_URL \(or --database-url\) is required/);
    expect(message).toMatch(/OUTBOX_ON_POISON="ignore" is not an allowed value; expected one of dead-letter \| fail\./);
    expect(message).toMatch(/OUTBOX_STATUS_INTERVAL="soon" is not a duration; expected a duration such as 500ms/);
    expect(message).toMatch(/OUTBOX_SLOT="my-slot" is not a plain SQL identifier/);
  });

  it('refuses a wait longer than a timer can hold (24d), but not a long retention', () => {
    for (const env of ['OUTBOX_PRUNE_EVERY', 'OUTBOX_STATUS_INTERVAL', 'OUTBOX_SLOT_POLL_INTERVAL']) {
      expect(() => loadConfig({ env: { ...required, [env]: '25d' } })).toThrow(new RegExp(`${env}="25d" is longer than 24d, the longest wait a timer can hold`));
    }
    expect(loadConfig({ env: { ...required, OUTBOX_PRUNE_EVERY: '24d', OUTBOX_PRUNE_RETENTION: '400d' } })).toMatchObject({ pruneEvery: 24 * 86_400_000, pruneRetention: 400 * 86_400_000 });
  });

  it('takes a bare boolean flag as true, and refuses an empty boolean variable instead of switching the feature on', () => {
    expect(loadConfig({ env: required, flags: { setup: '' } }).setup).toBe(true);
    expect(() => loadConfig({ env: { ...required, OUTBOX_AUTO_REGISTER: '' } })).toThrow(/OUTBOX_AUTO_REGISTER="" is not true or false/);
  });

  it('checks the database URL and the topic template with every other option', () => {
    let message = '';
    try {
      loadConfig({ env: { DATABASE_URL: 'this is not a url', KAFKA_BROKERS: 'k:9092', OUTBOX_TOPIC_TEMPLATE: 'outbox.{aggregate}', OUTBOX_SLOT: 'bad-slot' } });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/DATABASE_URL=\(redacted\) is not a URL; expected a postgres:\/\/ or postgresql:\/\/ URL/);
    expect(message).toMatch(/OUTBOX_TOPIC_TEMPLATE="outbox.\{aggregate\}" has an unknown placeholder \{aggregate\}; expected a topic name with placeholders among \{aggregate_type\}, \{event_type\}/);
    expect(message).toMatch(/OUTBOX_SLOT="bad-slot"/);
    expect(() => loadConfig({ env: { ...required, DATABASE_URL: 'mysql://db/billing' } })).toThrow(/DATABASE_URL=\(redacted\) is a mysql: URL, not postgres:\/\//);
  });

  it('refuses a replication or stall timeout shorter than a second (0 would fire at once)', () => {
    expect(() => loadConfig({ env: { ...required, OUTBOX_REPLICATION_TIMEOUT: '0', OUTBOX_STALL_TIMEOUT: '500ms' } })).toThrow(/OUTBOX_REPLICATION_TIMEOUT="0" is shorter than 1s[\s\S]*OUTBOX_STALL_TIMEOUT="500ms" is shorter than 1s/);
  });

  it("applies a command's own default under the environment and flags", () => {
    expect(loadConfig({ env: required, defaults: { httpPort: '9465' } }).httpPort).toBe(9465);
    expect(loadConfig({ env: { ...required, OUTBOX_HTTP_PORT: '9999' }, defaults: { httpPort: '9465' } }).httpPort).toBe(9999);
  });

  it('refuses contradictory settings', () => {
    expect(() => loadConfig({ env: { ...required, OUTBOX_RECONNECT_MIN: '1m', OUTBOX_RECONNECT_MAX: '1s' } })).toThrow(/OUTBOX_RECONNECT_MIN .* exceeds OUTBOX_RECONNECT_MAX/);
  });

  it('never shows a password, in errors or in the start-up log', () => {
    const config = loadConfig({ env: required });
    expect(JSON.stringify(redactedConfig(config))).not.toContain('s3cret');
    expect(JSON.stringify(redactedConfig(config))).toContain('relay:***@db');
  });
});
