// Here, not beside the code: it loads the librdkafka binding, built for the current Node only (the unit tests also run on the system's older Node).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RelayError } from '../../src/errors.js';
import { Secret } from '../../src/security/secret.js';
import { isKafkaRefusal, kafkaFailure } from '../../src/kafka/failure.js';
import { builtPatchLevel, headerList, KAFKA_JAVASCRIPT_PATCH_LEVEL, librdkafkaSecurity, loadLibrdkafka, namedLibrdkafkaError } from '../../src/kafka/librdkafka/binding.js';

describe('librdkafka: the relay\'s settings in its names, its errors in Kafka\'s', () => {
  it('SCRAM over TLS, mutual TLS and OAUTHBEARER become librdkafka settings', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rdkafka-'));
    const ca = path.join(dir, 'ca.pem');
    writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const tls = { caFile: ca, certFile: null, keyFile: null, keyPassword: null, verifyHostname: false };
    const scram = librdkafkaSecurity({ tls, sasl: { mechanism: 'scram-sha-512', username: 'relay', password: Secret.fromValue('KAFKA_SASL_PASSWORD', 'pw'), tokenFile: null, tokenProvider: null } });
    expect(scram).toMatchObject({ 'security.protocol': 'sasl_ssl', 'sasl.mechanisms': 'SCRAM-SHA-512', 'sasl.username': 'relay', 'sasl.password': 'pw', 'ssl.endpoint.identification.algorithm': 'none' });
    expect(String(scram['ssl.ca.pem'])).toContain('BEGIN CERTIFICATE');
    expect(librdkafkaSecurity({ tls: null, sasl: null })).toEqual({ 'security.protocol': 'plaintext' });

    const token = path.join(dir, 'token');
    const claims = Buffer.from(JSON.stringify({ sub: 'relay', exp: Math.floor(Date.now() / 1000) + 600 })).toString('base64url');
    writeFileSync(token, `e30.${claims}.`);
    const oauth = librdkafkaSecurity({ tls: null, sasl: { mechanism: 'oauthbearer', username: null, password: null, tokenFile: token, tokenProvider: null } });
    expect(oauth['security.protocol']).toBe('sasl_plaintext');
    const refreshed = await (oauth.oauthbearer_token_refresh_cb as () => Promise<{ tokenValue: string; lifetime: number; principal: string }>)();
    expect(refreshed).toMatchObject({ tokenValue: `e30.${claims}.`, principal: 'relay' });
    expect(refreshed.lifetime).toBeGreaterThan(Date.now());
  });

  it('is built with the level of scripts/kafka-javascript.patch the relay is written for, and gives headers as its flat list', () => {
    const patch = readFileSync(path.join(import.meta.dirname, '../../scripts/kafka-javascript.patch'), 'utf8');
    expect(Number(/"outboxRelayPatch", Nan::New<v8::Number>\((\d+)\)/.exec(patch)?.[1])).toBe(KAFKA_JAVASCRIPT_PATCH_LEVEL);
    loadLibrdkafka();
    expect(builtPatchLevel()).toBe(KAFKA_JAVASCRIPT_PATCH_LEVEL);
    const headers = Object.create(null) as Record<string, string>;
    Object.assign(headers, { event_id: 'e1', '': 'empty name', 'x-ü': '€' });
    headers['__proto__'] = 'p';
    expect(headerList(headers)).toEqual(['event_id', 'e1', '', 'empty name', 'x-ü', '€', '__proto__', 'p']);
  });

  it("names librdkafka's codes as Kafka does, and classifies them as kafkajs's", () => {
    expect(namedLibrdkafkaError({ code: 19, message: 'Broker: Not enough in-sync replicas' }).type).toBe('NOT_ENOUGH_REPLICAS');
    expect(namedLibrdkafkaError({ code: -192, message: 'Local: Message timed out' }).type).toBe('_MSG_TIMED_OUT');
    // A fatal error carries its cause in its text only.
    expect(namedLibrdkafkaError({ code: -150, message: 'Fatal error: Broker: Cluster authorization failed: Failed to acquire idempotence PID' }).type).toBe('CLUSTER_AUTHORIZATION_FAILED');
    // librdkafka's generic error events (code -1) and log lines carry the cause in words.
    expect(namedLibrdkafkaError({ code: -1, message: 'cluster authorization failed' }).type).toBe('CLUSTER_AUTHORIZATION_FAILED');
    expect(namedLibrdkafkaError({ code: -1, message: '[thrd:sasl_ssl://127.0.0.1:59501/bootstrap]: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512' }).type).toBe('_AUTHENTICATION');
    expect(kafkaFailure(namedLibrdkafkaError({ code: -1, message: 'sasl_ssl://127.0.0.1:59501/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed' }), 'connect').code).toBe('SINK_TLS');
    const authentication = namedLibrdkafkaError({ code: -169, message: 'SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512' });
    expect(kafkaFailure(authentication, 'connect').code).toBe('SINK_AUTHENTICATION');
    const untrusted = namedLibrdkafkaError({ code: -181, message: 'ssl://127.0.0.1:59501/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified' });
    expect(kafkaFailure(untrusted, 'connect').code).toBe('SINK_TLS');
    // A TLS connection that broke is not a trust problem: retried.
    expect(isKafkaRefusal(namedLibrdkafkaError({ code: -181, message: 'SSL transport error: Connection reset by peer' }))).toBe(false);
    expect(kafkaFailure(namedLibrdkafkaError({ code: -144, message: 'Local: This instance has been fenced by a newer instance' }), 'send', { transactionalId: 't' }).code).toBe('SINK_FENCED');
    const own = new RelayError('SINK_AUTHENTICATION', 'token expired');
    expect(namedLibrdkafkaError(own)).toBe(own);
  });
});
