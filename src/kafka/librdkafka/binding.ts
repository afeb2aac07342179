import { createRequire } from 'node:module';
import type * as Rdkafka from '@confluentinc/kafka-javascript';
import type { Logger } from 'pino';
import { RelayError } from '../../errors.js';
import { kafkaClientSecurity, type KafkaSecurity } from '../../security/kafka-security.js';
import { isKafkaRefusal } from '../failure.js';

/**
 * librdkafka's Node binding (@confluentinc/kafka-javascript), for the relay's producer
 * (producer.ts) and the webhooks consumer: the only module that loads it. Its settings for the
 * relay's TLS and SASL, its errors named as Kafka names them, its log lines, its callbacks as
 * promises.
 */

/** The binding's types, for the webhooks consumer (outside src/kafka, which alone imports the package). */
export type { Rdkafka };

const require = createRequire(import.meta.url);
const PACKAGE = '@confluentinc/kafka-javascript';

export const DISCONNECT_TIMEOUT_MS = 5_000;
export const CONNECT_TIMEOUT_MS = 30_000;

let loaded: typeof Rdkafka | null = null;

/** The level of scripts/kafka-javascript.patch the relay is written for (the patch's `outboxRelayPatch`). */
export const KAFKA_JAVASCRIPT_PATCH_LEVEL = 2;

/** The level of the patch the loaded binding was built with; undefined if it was built without it. */
export function builtPatchLevel(): number | undefined {
  const native = require(`${PACKAGE}/librdkafka.js`) as { AdminClient: { prototype: { outboxRelayPatch?: number } } };
  return native.AdminClient.prototype.outboxRelayPatch;
}

/** The binding, or SINK_CLIENT saying why it cannot load and how to build it. */
export function loadLibrdkafka(): typeof Rdkafka {
  if (loaded) return loaded;
  let binding: typeof Rdkafka;
  try {
    binding = require(PACKAGE) as typeof Rdkafka;
  } catch (error) {
    const reason = (error as Error).message.split('\n')[0];
    throw new RelayError('SINK_CLIENT', `OUTBOX_KAFKA_CLIENT=librdkafka: ${PACKAGE} cannot be loaded (${reason}); it is an opt-in that npm ci does not build: \`npm run build:librdkafka\` builds it (scripts/librdkafka.sh; as root, \`scripts/librdkafka.sh --install-packages\` first installs the Debian packages the build needs), or use OUTBOX_KAFKA_CLIENT=kafkajs`, { cause: error });
  }
  // The relay needs what scripts/kafka-javascript.patch gives, as this level of it gives it: a
  // binding without its DescribeConfigs would fail at the first topic, and one without its header
  // lists would read a list as headers named "0", "1", ...
  const built = builtPatchLevel();
  if (built !== KAFKA_JAVASCRIPT_PATCH_LEVEL) {
    throw new RelayError('SINK_CLIENT', `OUTBOX_KAFKA_CLIENT=librdkafka: ${PACKAGE} was built ${built === undefined ? 'without scripts/kafka-javascript.patch' : `with level ${built} of scripts/kafka-javascript.patch`} (expected level ${KAFKA_JAVASCRIPT_PATCH_LEVEL}); build it again with \`npm run build:librdkafka\`, or use OUTBOX_KAFKA_CLIENT=kafkajs`);
  }
  loaded = binding;
  return loaded;
}

/**
 * A record's headers as the patched binding's produce() takes them (scripts/kafka-javascript.patch):
 * one flat list, name, value, name, value, each copied once into librdkafka's header set. The
 * binding's own form, an object per header, it reads through a property list and four copies
 * per header. Typed as the binding's declaration has its parameter.
 */
export function headerList(headers: Readonly<Record<string, string>>): Rdkafka.MessageHeader[] {
  const list: string[] = [];
  for (const name in headers) list.push(name, headers[name]!);
  return list as unknown as Rdkafka.MessageHeader[];
}

export type RdkafkaConfig = Record<string, string | number | boolean | ((...args: never[]) => unknown)>;

/** librdkafka's names for the relay's TLS and SASL settings (files read now, as for kafkajs). */
export function librdkafkaSecurity(security: KafkaSecurity): RdkafkaConfig {
  const { ssl, sasl } = kafkaClientSecurity(security);
  const config: RdkafkaConfig = { 'security.protocol': `${sasl ? 'sasl_' : ''}${ssl ? 'ssl' : 'plaintext'}` };
  if (ssl && security.tls) {
    if (ssl.ca) config['ssl.ca.pem'] = String(ssl.ca);
    if (ssl.cert) config['ssl.certificate.pem'] = String(ssl.cert);
    if (ssl.key) config['ssl.key.pem'] = String(ssl.key);
    if (ssl.passphrase) config['ssl.key.password'] = ssl.passphrase;
    config['ssl.endpoint.identification.algorithm'] = security.tls.verifyHostname ? 'https' : 'none';
  }
  if (sasl?.mechanism === 'oauthbearer') {
    const provider = sasl.oauthBearerProvider;
    config['sasl.mechanisms'] = 'OAUTHBEARER';
    // Called by librdkafka before the token it has expires; a failure is reported to it and retried.
    config.oauthbearer_token_refresh_cb = async () => {
      const { value } = await provider();
      return { tokenValue: value, lifetime: tokenExpiry(value), principal: tokenSubject(value) };
    };
  } else if (sasl) {
    config['sasl.mechanisms'] = sasl.mechanism.toUpperCase();
    config['sasl.username'] = sasl.username;
    config['sasl.password'] = sasl.password;
  }
  return config;
}

/** A JWT's `exp` in ms; a token that is not a JWT is taken as good for 15 minutes (then read again). */
function tokenExpiry(token: string): number {
  const exp = jwtClaims(token)?.exp;
  return typeof exp === 'number' ? exp * 1000 : Date.now() + 15 * 60_000;
}

function tokenSubject(token: string): string {
  const sub = jwtClaims(token)?.sub;
  return typeof sub === 'string' ? sub : '';
}

function jwtClaims(token: string): Record<string, unknown> | null {
  const claims = token.split('.')[1];
  if (claims === undefined) return null;
  try {
    return JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/** librdkafka's error codes by number, named as Kafka names them (ERR_TOPIC_AUTHORIZATION_FAILED -> TOPIC_AUTHORIZATION_FAILED; its own, ERR__FENCED -> _FENCED). */
let errorNames: Map<number, string> | null = null;

function errorName(code: number): string | undefined {
  errorNames ??= new Map(Object.entries(loadLibrdkafka().CODES.ERRORS).map(([name, value]) => [value, name.replace(/^ERR_/, '')]));
  return errorNames.get(code);
}

/** A librdkafka error as an Error whose `type` is Kafka's name for it (what kafkaFailure classifies by). */
export function namedLibrdkafkaError(error: unknown): Error & { type: string } {
  if (error instanceof RelayError) return Object.assign(error, { type: error.code });
  if (error instanceof Error && typeof (error as { type?: unknown }).type === 'string') return error as Error & { type: string };
  const { code, message } = error as Rdkafka.LibrdKafkaError;
  let type = (typeof code === 'number' && errorName(code)) || 'LIBRDKAFKA_ERROR';
  // A fatal error, and librdkafka's generic ones (code -1), name their cause only in their text.
  if ((type === '_FATAL' || type === 'UNKNOWN' || type === 'LIBRDKAFKA_ERROR') && typeof message === 'string') type = errorNameInText(message) ?? type;
  return Object.assign(new Error(message ?? String(error), { cause: error }), { type });
}

/** Kafka's broker errors in librdkafka's words, longest first ("topic authorization failed" before "authorization failed"), lower case. */
let brokerErrorTexts: [string, string][] | null = null;

/**
 * The cause named in one of librdkafka's texts (an error event, a log line): its own words for a
 * TLS handshake or a SASL login that failed, or a broker error ("Fatal error: Broker: Cluster
 * authorization failed: ...", or the same words in lower case).
 */
function errorNameInText(text: string): string | undefined {
  const lower = text.toLowerCase();
  if (lower.includes('ssl handshake failed') || lower.includes('certificate verify failed')) return '_SSL';
  if (lower.includes('sasl authentication error')) return '_AUTHENTICATION';
  errorNameOfText('');
  brokerErrorTexts ??= [...namesByText!].filter(([words]) => words.startsWith('Broker: ')).map(([words, name]): [string, string] => [words.slice('Broker: '.length).toLowerCase(), name]).sort((a, b) => b[0].length - a[0].length);
  return brokerErrorTexts.find(([words]) => lower.includes(words))?.[1];
}

/** Kafka's names by librdkafka's text for them ("Broker: Not enough in-sync replicas" -> NOT_ENOUGH_REPLICAS), for its log lines. */
let namesByText: Map<string, string> | null = null;

export function errorNameOfText(text: string): string | undefined {
  if (!namesByText) {
    const { err2str } = require(`${PACKAGE}/librdkafka.js`) as { err2str(code: number): string };
    namesByText = new Map(Object.entries(loadLibrdkafka().CODES.ERRORS).map(([name, code]) => [err2str(code), name.replace(/^ERR_/, '')]));
  }
  return namesByText.get(text);
}

/** One of librdkafka's log lines (its `event.log`). */
export interface LibrdkafkaLogLine {
  readonly severity: number;
  readonly fac: string;
  readonly message: string;
}

/**
 * A warning or error line of librdkafka's in the relay's log, and the refusal it names, if any:
 * refusals are logged before (or instead of) any error event (a failed TLS handshake, a SASL
 * login, a fatal ACL refusal).
 */
export function logLibrdkafkaLine(logger: Logger, line: LibrdkafkaLogLine): (Error & { type: string }) | null {
  if (line.severity > 4) return null;
  const named = namedLibrdkafkaError({ code: -1, message: line.message });
  const refused = isKafkaRefusal(named);
  // A broker that cannot be reached is logged at every reconnect: the outage warning (from
  // its error event) says it once, so these go to debug, as kafkajs's connection errors do.
  logger[refused || line.fac !== 'FAIL' ? 'warn' : 'debug']({ librdkafka: line.fac }, line.message);
  return refused ? named : null;
}

/** Settles with librdkafka's callback, its error named. */
export function called<T = void>(start: (done: (error: Rdkafka.LibrdKafkaError | null | undefined, value?: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    start((error, value) => (error ? reject(namedLibrdkafkaError(error)) : resolve(value as T)));
  });
}
