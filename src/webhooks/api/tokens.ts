import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { RelayError } from '../../errors.js';
import type { Secret } from '../../security/secret.js';
import { customerIdProblem } from '../customer-rule.js';

/** Who made a request: the platform (every customer's objects), or one customer. */
export type Caller = { readonly kind: 'platform' } | { readonly kind: 'customer'; readonly customerId: string; readonly expiresAt: Date };

const PREFIX = 'whc1';

/**
 * The API's two kinds of bearer token. The platform token is the operator's secret, compared
 * by digest in constant time. A customer token is `whc1.<claims>.<HMAC-SHA256 of "whc1.<claims>">`,
 * signed with the signing key: verified by its signature, so none is ever stored, and each
 * ends at its `exp` (short-lived: a leaked portal link stops working by itself).
 */
export class TokenAuthority {
  constructor(
    private readonly platformToken: Secret,
    private readonly signingKey: Secret,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  mint(customerId: string, ttlSeconds: number): { readonly token: string; readonly expiresAt: Date } {
    const iat = Math.floor(this.clock().getTime() / 1000);
    const claims = Buffer.from(JSON.stringify({ sub: customerId, iat, exp: iat + ttlSeconds })).toString('base64url');
    const signed = `${PREFIX}.${claims}`;
    return { token: `${signed}.${this.sign(signed)}`, expiresAt: new Date((iat + ttlSeconds) * 1000) };
  }

  /** The caller an Authorization header names; WEBHOOK_API_UNAUTHORIZED or WEBHOOK_API_TOKEN_EXPIRED otherwise. */
  verify(authorization: string | undefined): Caller {
    const token = /^Bearer ([!-~]{1,4096})$/.exec(authorization ?? '')?.[1];
    if (token === undefined) throw unauthorized('no bearer token: send Authorization: Bearer <token>');
    if (token.startsWith(`${PREFIX}.`)) return this.customer(token);
    if (timingSafeEqual(digest(token), digest(this.platformToken.reveal()))) return { kind: 'platform' };
    throw unauthorized('the token is neither the platform token nor a customer token');
  }

  private customer(token: string): Caller {
    // Exactly three segments: a fourth would leave the signature valid and make another token of the same caller.
    const segments = token.split('.');
    if (segments.length !== 3) throw unauthorized('the customer token is not whc1.<claims>.<signature>');
    const [, claims, signature] = segments;
    const expected = this.sign(`${PREFIX}.${claims}`);
    if (signature === undefined || !timingSafeEqual(digest(signature), digest(expected))) throw unauthorized('the customer token is not signed with the signing key the API runs with');
    let parsed: { sub?: unknown; exp?: unknown };
    try {
      parsed = JSON.parse(Buffer.from(claims!, 'base64url').toString('utf8')) as typeof parsed;
    } catch {
      throw unauthorized('the customer token does not parse');
    }
    if (typeof parsed.sub !== 'string' || customerIdProblem(parsed.sub) !== null || typeof parsed.exp !== 'number') throw unauthorized('the customer token names no customer or expiry');
    const expiresAt = new Date(parsed.exp * 1000);
    if (expiresAt <= this.clock()) throw new RelayError('WEBHOOK_API_TOKEN_EXPIRED', `the customer token expired at ${expiresAt.toISOString()}: ask for a new link`);
    return { kind: 'customer', customerId: parsed.sub, expiresAt };
  }

  private sign(text: string): string {
    return createHmac('sha256', this.signingKey.reveal()).update(text).digest('base64url');
  }
}

/** Who the caller is, for keys kept per caller (rate limits, idempotency): never the token itself. */
export function callerKey(caller: Caller): string {
  return caller.kind === 'platform' ? 'platform' : `customer:${caller.customerId}`;
}

export function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function unauthorized(message: string): RelayError {
  return new RelayError('WEBHOOK_API_UNAUTHORIZED', message);
}
