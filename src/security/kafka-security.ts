import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createSecureContext, type ConnectionOptions } from 'node:tls';
import { RelayError } from '../errors.js';
import { readPem } from './pem.js';
import type { Secret } from './secret.js';

export const SASL_MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512', 'oauthbearer'] as const;
export type SaslMechanism = (typeof SASL_MECHANISMS)[number];

/** How the relay's Kafka connections are secured: every command, the demo and the consumer helper use it. */
export interface KafkaSecurity {
  /** TLS to the brokers; null for plaintext. */
  readonly tls: null | {
    /** PEM bundle of the CAs to trust; null for the system's. */
    readonly caFile: string | null;
    /** Client certificate and key (PEM) for mutual TLS. */
    readonly certFile: string | null;
    readonly keyFile: string | null;
    readonly keyPassword: Secret | null;
    /** Check that the broker's certificate names the host connected to. */
    readonly verifyHostname: boolean;
  };
  readonly sasl: null | {
    readonly mechanism: SaslMechanism;
    readonly username: string | null;
    readonly password: Secret | null;
    /** OAUTHBEARER: a file holding the token, read at each authentication (projected tokens rotate). */
    readonly tokenFile: string | null;
    /** OAUTHBEARER: a module whose default export returns a token (e.g. signed for Amazon MSK IAM). */
    readonly tokenProvider: string | null;
  };
}

export const PLAINTEXT: KafkaSecurity = { tls: null, sasl: null };

/** An OAUTHBEARER token as kafkajs asks for it. */
export interface OauthBearerToken {
  readonly value: string;
}

type PasswordMechanism = Exclude<SaslMechanism, 'oauthbearer'>;
/** One object type per mechanism, as kafkajs declares them. */
type PasswordSasl = { [M in PasswordMechanism]: { readonly mechanism: M; readonly username: string; readonly password: string } }[PasswordMechanism];

/** The kafkajs `ssl` and `sasl` settings; files are read here, so a new client sees rotated ones. */
export interface KafkaClientSecurity {
  readonly ssl?: ConnectionOptions;
  readonly sasl?: PasswordSasl | { readonly mechanism: 'oauthbearer'; readonly oauthBearerProvider: () => Promise<OauthBearerToken> };
}

export function kafkaClientSecurity(security: KafkaSecurity): KafkaClientSecurity {
  return { ...(security.tls ? { ssl: tlsOptions(security.tls) } : {}), ...(security.sasl ? { sasl: saslOptions(security.sasl) } : {}) };
}

function tlsOptions(tls: NonNullable<KafkaSecurity['tls']>): ConnectionOptions {
  const options: ConnectionOptions = {
    rejectUnauthorized: true,
    ...(tls.caFile ? { ca: readPem('KAFKA_SSL_CA_FILE', tls.caFile) } : {}),
    ...(tls.certFile ? { cert: readPem('KAFKA_SSL_CERT_FILE', tls.certFile) } : {}),
    ...(tls.keyFile ? { key: readPem('KAFKA_SSL_KEY_FILE', tls.keyFile) } : {}),
    ...(tls.keyPassword ? { passphrase: tls.keyPassword.reveal() } : {}),
    // The chain is still verified against the CA; only the name check is skipped, on request.
    ...(tls.verifyHostname ? {} : { checkServerIdentity: () => undefined }),
  };
  // A wrong key passphrase or a key that is not the certificate's fails inside kafkajs's connect,
  // which retries it forever as a connection error: found here, it stops the relay saying so.
  try {
    createSecureContext(options);
  } catch (error) {
    throw new RelayError('SINK_TLS', `KAFKA_SSL_CERT_FILE / KAFKA_SSL_KEY_FILE / KAFKA_SSL_KEY_PASSWORD cannot be used: ${(error as Error).message}`, { cause: error });
  }
  return options;
}

function saslOptions(sasl: NonNullable<KafkaSecurity['sasl']>): NonNullable<KafkaClientSecurity['sasl']> {
  if (sasl.mechanism !== 'oauthbearer') {
    if (!sasl.username || !sasl.password) throw new RelayError('CONFIG_INVALID', `KAFKA_SASL_MECHANISM=${sasl.mechanism} needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE)`);
    // (TypeScript does not spread a union-typed `mechanism` over the per-mechanism object types.)
    return { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password.reveal() } as PasswordSasl;
  }
  if (sasl.tokenFile) {
    const file = sasl.tokenFile;
    return { mechanism: 'oauthbearer', oauthBearerProvider: () => Promise.resolve({ value: unexpired(readToken(file), file) }) };
  }
  if (sasl.tokenProvider) {
    const provider = loadTokenProvider(sasl.tokenProvider);
    // Loaded now, awaited at the first authentication: a module that does not load is reported
    // there (CONFIG_INVALID), not as an unhandled rejection that kills the process before it.
    provider.catch(() => undefined);
    return { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: unexpired(toToken(await (await provider)()).value, sasl.tokenProvider!) }) };
  }
  throw new RelayError('CONFIG_INVALID', 'KAFKA_SASL_MECHANISM=oauthbearer needs KAFKA_SASL_OAUTHBEARER_TOKEN_FILE or KAFKA_SASL_OAUTHBEARER_PROVIDER');
}

/** Read at every authentication: a Kubernetes projected token is replaced in place before it expires. */
function readToken(file: string): string {
  let token: string;
  try {
    token = readFileSync(file, 'utf8').trim();
  } catch (error) {
    throw new RelayError('SINK_AUTHENTICATION', `KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, { cause: error });
  }
  if (token === '') throw new RelayError('SINK_AUTHENTICATION', `KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: ${file} is empty`);
  return token;
}

type TokenProvider = () => unknown;

async function loadTokenProvider(modulePath: string): Promise<TokenProvider> {
  let loaded: { default?: unknown };
  try {
    loaded = (await import(pathToFileURL(path.resolve(modulePath)).href)) as { default?: unknown };
  } catch (error) {
    throw new RelayError('CONFIG_INVALID', `KAFKA_SASL_OAUTHBEARER_PROVIDER: cannot load ${modulePath}: ${(error as Error).message}`, { cause: error });
  }
  if (typeof loaded.default !== 'function') throw new RelayError('CONFIG_INVALID', `KAFKA_SASL_OAUTHBEARER_PROVIDER: ${modulePath} has no default export function; expected \`export default async () => ({ value: token })\``);
  return loaded.default as TokenProvider;
}

function toToken(result: unknown): OauthBearerToken {
  if (typeof result === 'string' && result !== '') return { value: result };
  if (result && typeof result === 'object' && typeof (result as { value?: unknown }).value === 'string') return { value: (result as { value: string }).value };
  throw new RelayError('SINK_AUTHENTICATION', 'KAFKA_SASL_OAUTHBEARER_PROVIDER returned no token; expected a string or { value: string }');
}

/**
 * A JWT whose `exp` has passed is refused here, naming where it came from: kafkajs 2.2.4 does not
 * read the broker's refusal of a bad token (it sees only a closed connection or
 * ILLEGAL_SASL_STATE), so this is the one place an expired token can be reported as such.
 * Tokens that are not JWTs are passed on unchecked.
 */
function unexpired(token: string, source: string): string {
  const claims = token.split('.')[1];
  if (claims === undefined) return token;
  let exp: unknown;
  try {
    exp = (JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as { exp?: unknown }).exp;
  } catch {
    return token;
  }
  if (typeof exp === 'number' && exp * 1000 <= Date.now()) {
    throw new RelayError('SINK_AUTHENTICATION', `the OAUTHBEARER token from ${source} expired at ${new Date(exp * 1000).toISOString()}; refresh it (a projected token file is replaced by the kubelet before it expires)`);
  }
  return token;
}
