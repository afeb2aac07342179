import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { generateSecret, secretProblem, signatureHeader, webhookHeaders } from './signature.js';

const body = JSON.stringify({ type: 'invoice.paid', data: { id: 'inv_1', amount: 4200, note: 'café ✓' } });
const now = (): number => Math.floor(Date.now() / 1000);

describe('Standard Webhooks signatures, as the reference library verifies them', () => {
  it('makes headers a receiver with the secret verifies', () => {
    const secret = generateSecret();
    const headers = webhookHeaders({ secrets: [secret], webhookId: 'msg_1', timestampSeconds: now(), body });
    expect(Object.keys(headers).sort()).toEqual(['content-type', 'webhook-id', 'webhook-signature', 'webhook-timestamp']);
    expect(headers['content-type']).toBe('application/json');
    expect(headers['webhook-id']).toBe('msg_1');
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('signs with every secret during a rotation, so a receiver knowing only the old or only the new one verifies', () => {
    const [newer, older] = [generateSecret(), generateSecret()];
    const headers = webhookHeaders({ secrets: [newer, older], webhookId: 'msg_2', timestampSeconds: now(), body });
    expect(headers['webhook-signature']?.split(' ')).toHaveLength(2);
    expect(new Webhook(older).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new Webhook(newer).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(generateSecret()).verify(body, headers)).toThrow(/No matching signature/);
  });

  it('keeps the order of the secrets in the header', () => {
    const [a, b] = [generateSecret(), generateSecret()];
    const timestamp = now();
    const [first, second] = signatureHeader([a, b], 'msg_3', timestamp, body).split(' ');
    expect(first).toBe(signatureHeader([a], 'msg_3', timestamp, body));
    expect(second).toBe(signatureHeader([b], 'msg_3', timestamp, body));
  });

  it('fails verification when the body, the id or the timestamp was changed', () => {
    const secret = generateSecret();
    const headers = webhookHeaders({ secrets: [secret], webhookId: 'msg_4', timestampSeconds: now(), body });
    const receiver = new Webhook(secret);
    expect(() => receiver.verify(body.replace('4200', '4201'), headers)).toThrow(/No matching signature/);
    expect(() => receiver.verify(body, { ...headers, 'webhook-id': 'msg_5' })).toThrow(/No matching signature/);
    expect(() => receiver.verify(body, { ...headers, 'webhook-timestamp': String(now() - 1) })).toThrow(/No matching signature/);
  });

  it('matches a signature computed independently of this module (the specification\'s example)', () => {
    // From the Standard Webhooks specification's test vectors.
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const payload = '{"test": 2432232314}';
    expect(signatureHeader([secret], 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, payload)).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });
});

describe('secretProblem', () => {
  it('accepts what generateSecret makes, and whsec_ secrets of 24 to 64 bytes', () => {
    expect(generateSecret()).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(secretProblem(generateSecret())).toBeNull();
    expect(secretProblem(`whsec_${Buffer.alloc(24, 1).toString('base64')}`)).toBeNull();
    expect(secretProblem(`whsec_${Buffer.alloc(64, 1).toString('base64')}`)).toBeNull();
  });

  it('says what is wrong and what is expected, without quoting the secret', () => {
    const expected = 'expected whsec_ followed by base64 of 24 to 64 bytes';
    const cases: [string, string][] = [
      ['MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', `is not a whsec_ secret: ${expected}`],
      ['WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', `is not a whsec_ secret: ${expected}`],
      ['whsec_', `is not valid base64 after whsec_: ${expected}`],
      ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS', `is not valid base64 after whsec_: ${expected}`],
      ['whsec_MfKQ9r8GKYqr-wjUPD8ILPZIo2LaLaSw', `is not valid base64 after whsec_: ${expected}`],
      [`whsec_${Buffer.alloc(23, 1).toString('base64')}`, `decodes to 23 bytes: ${expected}`],
      [`whsec_${Buffer.alloc(65, 1).toString('base64')}`, `decodes to 65 bytes: ${expected}`],
    ];
    // Exact sentences: none of them can carry the secret.
    for (const [secret, problem] of cases) expect(secretProblem(secret)).toBe(problem);
  });
});
