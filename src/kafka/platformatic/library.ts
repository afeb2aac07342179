/**
 * @platformatic/kafka, for every module of src/kafka/platformatic/: what its clients are made
 * with (brokers, TLS, SASL, retries) and how their errors are named as Kafka names them. Only
 * modules of this folder import the library (eslint.config.js), and open.ts reaches them by a
 * dynamic import: the library needs Node 22.22 or later, and a process on another client (the
 * unit tests on Node 20 among them) never loads it.
 */
import type { BaseOptions, SASLOptions } from '@platformatic/kafka';
import { clientSoftwareVersion } from '@platformatic/kafka';
import { kafkaClientSecurity, PLAINTEXT, type KafkaSecurity } from '../../security/kafka-security.js';
import { isKafkaRefusal } from '../failure.js';

/** The library's version, for the producer's first log line. */
export const LIBRARY_VERSION: string = clientSoftwareVersion;

/** How long a connection (TCP, TLS and SASL) may take before it counts as failed and is tried again. */
export const CONNECT_TIMEOUT_MS = 10_000;
export const DISCONNECT_TIMEOUT_MS = 5_000;

/** Retries of one operation (a produce to one broker, a metadata request): ~23 s at most 2 s apart, as on kafkajs. */
const RETRIES = 14;
const FIRST_RETRY_MS = 200;
const MAX_RETRY_MS = 2_000;

/** An operation the client retries: what a producer counts (onRequestFailed) and logs. A client given one is closed at a refusal (the relay stops on it). */
export type RetryListener = (operation: string, error: Error) => void;

/** The connection options every client of the relay on @platformatic/kafka is made with. */
export function platformaticClientOptions(connection: { readonly clientId: string; readonly brokers: readonly string[]; readonly security?: KafkaSecurity }, onRetry?: RetryListener): BaseOptions {
  const { ssl, sasl } = kafkaClientSecurity(connection.security ?? PLAINTEXT);
  return {
    clientId: connection.clientId,
    bootstrapBrokers: [...connection.brokers],
    connectTimeout: CONNECT_TIMEOUT_MS,
    retries: RETRIES,
    // The library calls this before each retry of an operation: where a failed produce request is seen (it logs nothing itself).
    retryDelay: (client, operation, attempt, _retries, error) => {
      onRetry?.(operation, error);
      // The library retries a refusal (an untrusted certificate, refused credentials, a missing
      // ACL) as any network error, ~23 s of them, and each operation again: closing the client
      // ends the operation now, failing with the refusal (the relay stops on it, SINK_TLS etc.).
      if (onRetry && isKafkaRefusal(namedPlatformaticError(error))) (client as { close(): Promise<void> }).close().catch(() => undefined);
      return Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (attempt - 1));
    },
    ...(ssl && { tls: ssl }),
    ...(sasl && { sasl: saslOptions(sasl) }),
  } as BaseOptions;
}

function saslOptions(sasl: NonNullable<ReturnType<typeof kafkaClientSecurity>['sasl']>): SASLOptions {
  if (sasl.mechanism === 'oauthbearer') {
    const provider = sasl.oauthBearerProvider;
    // Asked at each authentication: a token file is read again, a provider called again.
    return { mechanism: 'OAUTHBEARER', token: async () => (await provider()).value };
  }
  const mechanism = ({ plain: 'PLAIN', 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512' } as const)[sasl.mechanism];
  return { mechanism, username: sasl.username, password: sasl.password };
}

interface LibraryError {
  readonly message?: string;
  readonly code?: string;
  readonly apiId?: string;
  readonly cause?: unknown;
  readonly errors?: readonly unknown[];
}

/**
 * The Kafka error inside one of the library's (a ProtocolError's apiId, e.g. NOT_ENOUGH_REPLICAS,
 * often wrapped in a MultipleErrors of every retry), else an error with a code of its own: Node's
 * (a TLS trust failure) or the relay's (a RelayError its OAUTHBEARER token provider threw). The
 * last attempt's error says why it finally failed: searched from the end.
 */
function innermost(error: unknown): { readonly apiId?: string; readonly code?: string; readonly error: unknown } | null {
  let coded: { readonly code: string; readonly error: unknown } | null = null;
  const visit = (current: unknown, depth: number): { readonly apiId: string; readonly error: unknown } | null => {
    if (!current || typeof current !== 'object' || depth > 6) return null;
    const { apiId, code, errors, cause } = current as LibraryError;
    if (typeof apiId === 'string') return { apiId, error: current };
    if (typeof code === 'string' && !code.startsWith('PLT_KFK_')) coded ??= { code, error: current };
    for (const nested of [...(errors ?? [])].reverse()) {
      const found = visit(nested, depth + 1);
      if (found) return found;
    }
    return visit(cause, depth + 1);
  };
  return visit(error, 0) ?? coded;
}

/**
 * The library's error with Kafka's name as its `type` (what failure.ts reads, as kafkajs sets it):
 * a refused SASL handshake is SASL_AUTHENTICATION_FAILED, a certificate Node refused keeps Node's
 * code on its cause (tls-errors.ts reads it).
 */
export function namedPlatformaticError(error: unknown): Error & { type: string } {
  if (error instanceof Error && typeof (error as { type?: unknown }).type === 'string' && !(error as LibraryError).code?.startsWith('PLT_KFK_')) return error as Error & { type: string };
  const found = innermost(error);
  const code = (error as LibraryError | null)?.code;
  const type = found?.apiId ?? (code === 'PLT_KFK_AUTHENTICATION' || hasCode(error, 'PLT_KFK_AUTHENTICATION') ? 'SASL_AUTHENTICATION_FAILED' : (code ?? 'PLT_KFK_ERROR'));
  const detail = found?.error && found.error !== error ? `${(error as Error).message}: ${(found.error as Error).message}` : (error as Error)?.message;
  const named = new Error(detail, { cause: found?.code ? found.error : error }) as Error & { type: string };
  named.type = type;
  return named;
}

function hasCode(error: unknown, code: string, depth = 0): boolean {
  if (!error || typeof error !== 'object' || depth > 6) return false;
  const current = error as LibraryError;
  if (current.code === code) return true;
  return (current.errors ?? []).some((nested) => hasCode(nested, code, depth + 1)) || hasCode(current.cause, code, depth + 1);
}
