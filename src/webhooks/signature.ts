/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): a receiver verifies with any
 * Standard Webhooks library, and the reference one is what the tests check against.
 */
import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';
const EXPECTED = `expected ${PREFIX} followed by base64 of 24 to 64 bytes`;
// Padded standard base64 only: what the reference library (@stablelib/base64) decodes; a
// secret Node's lenient decoder accepted could be one no receiver can use.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A new secret: 32 random bytes, the size the specification recommends. */
export function generateSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

/**
 * Null for a usable secret, else what is wrong with it, as a predicate to follow the secret's
 * name ("is not a whsec_ secret: ..."). Never quotes the secret.
 */
export function secretProblem(secret: string): string | null {
  if (!secret.startsWith(PREFIX)) return `is not a ${PREFIX} secret: ${EXPECTED}`;
  const encoded = secret.slice(PREFIX.length);
  if (encoded === '' || !BASE64.test(encoded)) return `is not valid base64 after ${PREFIX}: ${EXPECTED}`;
  const size = Buffer.from(encoded, 'base64').length;
  if (size < 24 || size > 64) return `decodes to ${size} bytes: ${EXPECTED}`;
  return null;
}

/**
 * The webhook-signature value: one `v1,<signature>` per secret, in the order given, so that
 * during a rotation a receiver holding either the old or the new secret verifies. The secrets
 * are ones `secretProblem` accepted where they came in; the timestamp is whole seconds, as the
 * receiver reads it back.
 */
export function signatureHeader(secrets: readonly string[], webhookId: string, timestampSeconds: number, body: string): string {
  const signed = `${webhookId}.${timestampSeconds}.${body}`;
  return secrets
    .map((secret) => `v1,${createHmac('sha256', Buffer.from(secret.slice(PREFIX.length), 'base64')).update(signed).digest('base64')}`)
    .join(' ');
}

/** The headers every delivery carries. */
export function webhookHeaders(input: {
  readonly secrets: readonly string[];
  readonly webhookId: string;
  readonly timestampSeconds: number;
  readonly body: string;
}): Record<string, string> {
  return {
    'webhook-id': input.webhookId,
    'webhook-timestamp': String(input.timestampSeconds),
    'webhook-signature': signatureHeader(input.secrets, input.webhookId, input.timestampSeconds, input.body),
    'content-type': 'application/json',
  };
}
