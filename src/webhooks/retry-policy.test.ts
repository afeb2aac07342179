import { describe, expect, it } from 'vitest';
import type { AttemptResult } from './http-sender.js';
import { judgeAttempt, type RetryPolicy } from './retry-policy.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
// Standard Webhooks: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
const policy: RetryPolicy = { scheduleMs: [0, 5_000, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR], maxRetryAfterMs: HOUR };
const now = new Date('2026-12-02T00:00:00Z');
const middle = () => 0.5;

function result(outcome: AttemptResult['outcome'], statusCode: number | null = null, retryAfterMs: number | null = null): AttemptResult {
  return { outcome, statusCode, latencyMs: 3, retryAfterMs, response: null, error: outcome === 'delivered' ? null : 'failed' };
}

describe('the retry schedule', () => {
  it('walks the schedule after each failure, then fails the delivery', () => {
    const delays: number[] = [];
    let failures = 0;
    for (;;) {
      const { delivery } = judgeAttempt(policy, failures, result('http_status', 500), now, middle);
      if (delivery.status !== 'pending') {
        expect(delivery).toEqual({ status: 'failed', failures: 8 });
        break;
      }
      delays.push(delivery.nextAttemptAt.getTime() - now.getTime());
      failures = delivery.failures;
    }
    expect(delays).toEqual(policy.scheduleMs.slice(1));
  });

  it('spreads each delay within 20% either side', () => {
    const early = judgeAttempt(policy, 2, result('timeout'), now, () => 0).delivery;
    const late = judgeAttempt(policy, 2, result('timeout'), now, () => 1).delivery;
    expect(early.status === 'pending' && early.nextAttemptAt.getTime() - now.getTime()).toBe(24 * MINUTE);
    expect(late.status === 'pending' && late.nextAttemptAt.getTime() - now.getTime()).toBe(36 * MINUTE);
  });

  it('a success delivers and closes the circuit', () => {
    expect(judgeAttempt(policy, 3, result('delivered', 204), now)).toEqual({ delivery: { status: 'delivered' }, endpoint: { kind: 'success' } });
  });

  it('429 with Retry-After pauses the endpoint and costs no attempt of the schedule', () => {
    const verdict = judgeAttempt(policy, 1, result('http_status', 429, 7_000), now, middle);
    expect(verdict.delivery).toEqual({ status: 'pending', nextAttemptAt: new Date(now.getTime() + 7_000), failures: 1 });
    expect(verdict.endpoint).toEqual({ kind: 'failure', circuit: false, gone: false, pauseUntil: new Date(now.getTime() + 7_000) });
  });

  it('503 with Retry-After counts as a failure and waits at least as long as asked', () => {
    const verdict = judgeAttempt(policy, 1, result('http_status', 503, 20 * MINUTE), now, middle);
    expect(verdict.delivery).toEqual({ status: 'pending', nextAttemptAt: new Date(now.getTime() + 20 * MINUTE), failures: 2 });
    expect(verdict.endpoint).toMatchObject({ circuit: true, pauseUntil: new Date(now.getTime() + 20 * MINUTE) });
  });

  it('a Retry-After beyond the bound is cut to it', () => {
    const verdict = judgeAttempt(policy, 0, result('http_status', 429, 30 * 24 * HOUR), now, middle);
    expect(verdict.delivery.status === 'pending' && verdict.delivery.nextAttemptAt).toEqual(new Date(now.getTime() + HOUR));
  });

  it('410 Gone marks the endpoint gone', () => {
    expect(judgeAttempt(policy, 0, result('http_status', 410), now, middle).endpoint).toEqual({ kind: 'failure', circuit: true, gone: true, pauseUntil: null });
  });

  it('a redirect is a failure like any other', () => {
    expect(judgeAttempt(policy, 0, result('redirect', 301), now, middle).delivery).toEqual({ status: 'pending', nextAttemptAt: new Date(now.getTime() + 5_000), failures: 1 });
  });
});
