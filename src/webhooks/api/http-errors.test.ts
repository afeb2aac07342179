import { describe, expect, it } from 'vitest';
import { RelayError } from '../../errors.js';
import { errorAnswer } from './http-errors.js';

describe('errorAnswer', () => {
  it('answers a code the API does not expect 500 INTERNAL with a generic message: never its detail (a secret file path)', () => {
    const answer = errorAnswer(new RelayError('CONFIG_INVALID', 'OUTBOX_WEBHOOK_API_SIGNING_KEY_FILE: cannot read /run/secrets/key (ENOENT)'));
    expect(answer).toEqual({ status: 500, body: { error: { code: 'INTERNAL', message: 'an internal error; it is logged' } } });
  });

  it('keeps the code and status of the errors it expects', () => {
    expect(errorAnswer(new RelayError('WEBHOOK_NOT_FOUND', 'no webhook delivery 1')).status).toBe(404);
    expect(errorAnswer(new RelayError('WEBHOOK_API_INVALID_CURSOR', 'bad')).body.error.code).toBe('WEBHOOK_API_INVALID_CURSOR');
  });

  it('answers text Postgres refused to hold (SQLSTATE 22021, a NUL) 400, not 500: the request is wrong, not the server', () => {
    const answer = errorAnswer(Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code: '22021' }));
    expect(answer).toEqual({ status: 400, body: { error: { code: 'WEBHOOK_API_INVALID_REQUEST', message: expect.stringContaining('NUL') } } });
  });
});
