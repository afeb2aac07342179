import { describe, expect, it } from 'vitest';
import { Secret } from '../../security/secret.js';
import { callerKey, TokenAuthority } from './tokens.js';

describe('TokenAuthority', () => {
  const authority = new TokenAuthority(Secret.fromValue('t', 'platform-token-0123456789abcdef0123'), Secret.fromValue('k', 'signing-key-0123456789abcdef0123456789'));

  it('accepts a customer token as minted, and names its caller by customer (the rate limit key)', () => {
    const caller = authority.verify(`Bearer ${authority.mint('cus_1', 60).token}`);
    expect(callerKey(caller)).toBe('customer:cus_1');
  });

  it('refuses a customer token with a segment more or less than three: a suffix makes no new valid token', () => {
    const { token } = authority.mint('cus_1', 60);
    for (const altered of [`${token}.0`, `${token}.`, `${token}.x.y`, token.split('.').slice(0, 2).join('.')]) {
      expect(() => authority.verify(`Bearer ${altered}`), altered).toThrow(expect.objectContaining({ code: 'WEBHOOK_API_UNAUTHORIZED' }));
    }
  });
});
