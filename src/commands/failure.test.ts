import { kafkajs } from '../kafka/kafkajs/kafkajs.js';

const { KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded } = kafkajs();
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, RelayError } from '../errors.js';
import { commandFailure } from './failure.js';

/** An ErrorResponse as pg throws it: a DatabaseError with a severity and a SQLSTATE. */
function postgresError(code: string, message: string): Error {
  return Object.assign(new pg.DatabaseError(message, message.length, 'error'), { severity: 'FATAL', code });
}

/** A refused connect as Node's net module reports it. */
const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', errno: -111, syscall: 'connect', address: '127.0.0.1', port: 5432 });

describe('what the CLI prints for a failure', () => {
  it("is always one of the relay's codes", () => {
    const failures = [postgresError('3D000', 'x'), postgresError('XX000', 'x'), refused(), new TypeError('x'), 'a string', null, new RelayError('SOURCE_SLOT_LOST', 'x')];
    for (const failure of failures) expect(Object.keys(ERROR_CODES)).toContain(commandFailure(failure).code);
  });

  it('names a database that does not exist, keeping Postgres\'s SQLSTATE and words', () => {
    const failure = commandFailure(postgresError('3D000', 'database "billing" does not exist'));
    expect(failure.code).toBe('SOURCE_DATABASE_MISSING');
    expect(failure.message).toMatch(/\(3D000: database "billing" does not exist\); correct the database name in DATABASE_URL/);
  });

  it('takes a refused or reset connection for Postgres gone, keeping the driver\'s code', () => {
    const failure = commandFailure(refused());
    expect(failure).toMatchObject({ code: 'SOURCE_DISCONNECTED', retriable: true });
    expect(failure.message).toMatch(/^cannot reach Postgres \(ECONNREFUSED: connect ECONNREFUSED 127\.0\.0\.1:5432\); check that it is up/);
    expect(commandFailure(new Error('Connection terminated unexpectedly')).code).toBe('SOURCE_DISCONNECTED');
    expect(commandFailure(postgresError('57P01', 'terminating connection due to administrator command')).code).toBe('SOURCE_DISCONNECTED');
    expect(commandFailure(postgresError('53300', 'sorry, too many clients already')).code).toBe('SOURCE_DISCONNECTED');
  });

  it('reports other answers of Postgres by their SQLSTATE, and one it has no code for as SOURCE_QUERY_FAILED', () => {
    expect(commandFailure(postgresError('42P01', 'relation "public.event_outbox" does not exist'))).toMatchObject({ code: 'SETUP_TABLE', message: expect.stringMatching(/^Postgres answered 42P01: relation "public.event_outbox" does not exist; `outbox-relay setup`/) });
    expect(commandFailure(postgresError('25006', 'cannot execute CREATE TABLE in a read-only transaction')).code).toBe('SOURCE_NO_PRIMARY');
    expect(commandFailure(postgresError('28P01', 'password authentication failed for user "relay"')).code).toBe('SOURCE_AUTHENTICATION');
    expect(commandFailure(postgresError('42501', 'permission denied for table event_outbox')).code).toBe('SETUP_PRIVILEGE');
    const unknown = commandFailure(postgresError('57014', 'canceling statement due to statement timeout'));
    expect(unknown.code).toBe('SOURCE_QUERY_FAILED');
    expect(unknown.message).toMatch(/^Postgres answered 57014: canceling statement due to statement timeout \(a SQLSTATE the relay has no code of its own for/);
    // Postgres's hint is kept: it names the setting to raise.
    const locks = commandFailure(Object.assign(postgresError('53200', 'out of shared memory'), { hint: 'You might need to increase "max_locks_per_transaction".' }));
    expect(locks.message).toMatch(/^Postgres answered 53200: out of shared memory \(Postgres's hint: You might need to increase "max_locks_per_transaction"\.\)/);
  });

  it('names in the hint of a missing table or schema what the command read its tables from', () => {
    const noSchema = commandFailure(postgresError('3F000', 'schema "billing" does not exist'), { tables: 'OUTBOX_SOURCES', of: 'outbox' });
    expect(noSchema.code).toBe('SETUP_TABLE');
    expect(noSchema.message).toMatch(/^Postgres answered 3F000: schema "billing" does not exist; create the schema \(setup makes an outbox table in a schema that exists\), or correct the table's name in OUTBOX_SOURCES$/);
    const noTable = commandFailure(postgresError('42P01', 'relation "billing.outbox" does not exist'), { tables: 'OUTBOX_TABLE', of: 'outbox' });
    expect(noTable.message).toMatch(/^Postgres answered 42P01: relation "billing.outbox" does not exist; `outbox-relay setup` creates an outbox table; check OUTBOX_TABLE$/);
    // Not known (a failure before the command read its configuration): every place a table may be named.
    expect(commandFailure(postgresError('42P01', 'x')).message).toMatch(/; `outbox-relay setup` \(or `outbox-relay webhooks setup`\) creates what the relay needs; check OUTBOX_TABLE or OUTBOX_SOURCES, and OUTBOX_WEBHOOK_SCHEMA$/);
  });

  it("classifies kafkajs's own errors (the webhooks consumer's) as the sink does", () => {
    const connection = new KafkaJSConnectionError('Connection error: connect ECONNREFUSED 127.0.0.1:9092', { broker: '127.0.0.1:9092', code: 'ECONNREFUSED' });
    const failure = commandFailure(new KafkaJSNumberOfRetriesExceeded(connection, { retryCount: 5, retryTime: 1000 }));
    expect(failure.code).toBe('SINK_PUBLISH');
    expect(failure.message).toMatch(/^Kafka failed: KafkaJSNumberOfRetriesExceeded: Connection error: connect ECONNREFUSED 127\.0\.0\.1:9092/);
  });

  it('calls anything nobody classified INTERNAL, naming it: a bug, not a connection (a file error included)', () => {
    const bug = commandFailure(new TypeError("Cannot read properties of undefined (reading 'lsn')"));
    expect(bug.code).toBe('INTERNAL');
    expect(bug.message).toMatch(/^an error the relay does not classify \(TypeError: Cannot read properties of undefined \(reading 'lsn'\)\): a bug/);
    const file = commandFailure(Object.assign(new Error("ENOENT: no such file or directory, open '/nope'"), { code: 'ENOENT', syscall: 'open' }));
    expect(file).toMatchObject({ code: 'INTERNAL', message: expect.stringMatching(/\(Error ENOENT: /) });
  });

  it("keeps the relay's own errors as they are", () => {
    const own = new RelayError('SOURCE_SLOT_LOST', 'lost');
    expect(commandFailure(own)).toBe(own);
  });
});
