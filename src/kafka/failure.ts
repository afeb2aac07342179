import { RelayError, type ErrorCode } from '../errors.js';
import { isTlsTrustError } from '../security/tls-errors.js';

/** Kafka's answers that mean another producer with this transactional id took over. */
const FENCED_ERRORS = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH', '_FENCED']);
/** Kafka's answers that mean the broker cannot keep exactly-once as configured. */
const EXACTLY_ONCE_REFUSALS = new Set(['INVALID_TRANSACTION_TIMEOUT', 'UNSUPPORTED_VERSION', 'KafkaJSNotImplemented', 'UNSUPPORTED_FOR_MESSAGE_FORMAT']);

// kafkajs's names, Kafka's, and librdkafka's own (_AUTHENTICATION: a SASL handshake it gave up on).
const AUTHENTICATION_ERRORS = new Set(['KafkaJSSASLAuthenticationError', 'SASL_AUTHENTICATION_FAILED', 'ILLEGAL_SASL_STATE', 'UNSUPPORTED_SASL_MECHANISM', '_AUTHENTICATION']);
/** librdkafka's words (from OpenSSL) for a broker certificate it does not trust: its error is _SSL, as for any TLS failure. */
const LIBRDKAFKA_TLS_TRUST = /certificate verify failed|self[- ]signed certificate|unable to get (?:local )?issuer certificate|unknown ca/i;
const AUTHORIZATION_ERRORS = new Set(['TOPIC_AUTHORIZATION_FAILED', 'CLUSTER_AUTHORIZATION_FAILED', 'GROUP_AUTHORIZATION_FAILED', 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED']);

/** Kafka's name for an error (e.g. NOT_ENOUGH_REPLICAS: its `type`, as kafkajs and namedLibrdkafkaError set it), else its class name (kafkajs's). */
export function kafkaErrorName(error: unknown): string {
  const { type, name } = error as { readonly type?: string; readonly name?: string };
  return type ?? name ?? 'Error';
}

/**
 * A Kafka client's failure (kafkajs's, or librdkafka's named as Kafka names it) as the relay's error. Refused credentials, a missing ACL or an untrusted
 * certificate stop the relay with what to fix (retrying repeats the refusal); anything else is a
 * retriable SINK_PUBLISH.
 */
export function kafkaFailure(error: unknown, what: string, exactlyOnce?: { readonly transactionalId: string } | null): RelayError {
  const names: string[] = [];
  for (let current = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    // The relay's own, raised inside kafkajs (e.g. by the OAUTHBEARER token provider): keep its code.
    if (current instanceof RelayError) return current;
    names.push(kafkaErrorName(current));
  }
  const detail = `${kafkaErrorName(error)}: ${(error as Error).message}`;
  let code: ErrorCode = 'SINK_PUBLISH';
  let hint = '';
  if (names.some((name) => AUTHENTICATION_ERRORS.has(name))) {
    code = 'SINK_AUTHENTICATION';
    hint = '; check KAFKA_SASL_MECHANISM and the credentials (KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD[_FILE], or the OAUTHBEARER token)';
  } else if (names.some((name) => AUTHORIZATION_ERRORS.has(name))) {
    code = 'SINK_NOT_AUTHORIZED';
    hint = "; the relay's principal needs WRITE and DESCRIBE (and DESCRIBE_CONFIGS) on its topics, CREATE if they are auto-created (docs/security.md#kafka-acls)";
    if (exactlyOnce) hint += `, and for exactly-once WRITE and DESCRIBE on transactional id ${exactlyOnce.transactionalId} and READ on the progress topic (docs/delivery-modes.md)`;
  } else if (exactlyOnce && names.some((name) => EXACTLY_ONCE_REFUSALS.has(name))) {
    code = 'SINK_EXACTLY_ONCE';
    hint = names.includes('INVALID_TRANSACTION_TIMEOUT')
      ? "; OUTBOX_TRANSACTION_TIMEOUT exceeds the broker's transaction.max.timeout.ms: lower it, or raise the broker's limit"
      : '; OUTBOX_DELIVERY=exactly-once needs brokers with transactions (Kafka 0.11 or later, with transaction.state.log settings the cluster can meet)';
  } else if (exactlyOnce && names.some((name) => FENCED_ERRORS.has(name))) {
    code = 'SINK_FENCED';
    hint = `; another relay instance started with transactional id ${exactlyOnce.transactionalId} and took over (this session ends; it waits as a standby while the other holds the slot)`;
  } else if (exactlyOnce && names.includes('COORDINATOR_NOT_AVAILABLE')) {
    hint = "; the transaction coordinator is not available: the brokers' transaction.state.log.replication.factor and transaction.state.log.min.isr must be met by the live brokers";
  } else if (isTlsTrustError(error) || (names.includes('_SSL') && LIBRDKAFKA_TLS_TRUST.test(detail))) {
    code = 'SINK_TLS';
    hint = '; check KAFKA_SSL_CA_FILE (the CA that signed the brokers) and, for mutual TLS, KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE';
  }
  return new RelayError(code, `${what}: ${detail}${hint}`, { cause: error });
}

/** A failure retrying cannot mend (refused credentials, a missing ACL, an untrusted certificate): the relay stops on it. */
export function isKafkaRefusal(error: unknown): boolean {
  const { code } = kafkaFailure(error, '');
  return code === 'SINK_AUTHENTICATION' || code === 'SINK_NOT_AUTHORIZED' || code === 'SINK_TLS';
}

