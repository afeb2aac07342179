import type { AttemptResult } from './http-sender.js';

/**
 * What one attempt's result means for its delivery and for its endpoint: a pure function of
 * the result, the schedule and the clock, so the schedule is tested without waiting hours.
 */
export interface RetryPolicy {
  /** Delay before each attempt: [0] after the event is recorded, [n] after the n-th failure. Its length is the failures allowed. */
  readonly scheduleMs: readonly number[];
  /** Retry-After is honoured up to this long (a header asking for a week would hold deliveries for a week). */
  readonly maxRetryAfterMs: number;
}

/** Standard Webhooks' recommendation, spread so that endpoints failing together do not retry together. */
export const JITTER = 0.2;

export type DeliveryVerdict =
  | { readonly status: 'delivered' }
  | { readonly status: 'pending'; readonly nextAttemptAt: Date; readonly failures: number }
  | { readonly status: 'failed'; readonly failures: number };

/**
 * success: the endpoint works (closes its circuit, ends its failure streak).
 * failure: `circuit` when it counts toward opening the circuit (a 429 does not: the endpoint is
 * alive and asked for time); `gone` when it answered 410 (the endpoint is disabled);
 * `pauseUntil` when it asked for a pause (Retry-After), which holds every delivery to it.
 */
export type EndpointVerdict =
  | { readonly kind: 'success' }
  | { readonly kind: 'failure'; readonly circuit: boolean; readonly gone: boolean; readonly pauseUntil: Date | null };

export interface Verdict {
  readonly delivery: DeliveryVerdict;
  readonly endpoint: EndpointVerdict;
}

/** `failures`: the delivery's failures before this attempt. `random` in [0, 1). */
export function judgeAttempt(policy: RetryPolicy, failures: number, result: AttemptResult, now: Date, random: () => number = Math.random): Verdict {
  if (result.outcome === 'delivered') return { delivery: { status: 'delivered' }, endpoint: { kind: 'success' } };
  const retryAfterMs = result.retryAfterMs === null ? null : Math.min(Math.max(result.retryAfterMs, 0), policy.maxRetryAfterMs);
  const askedToWait = retryAfterMs !== null && (result.statusCode === 429 || result.statusCode === 503);
  const pauseUntil = askedToWait ? new Date(now.getTime() + retryAfterMs) : null;
  // Throttled: the attempt is recorded but not counted against the schedule (a fast Retry-After
  // would otherwise use up every attempt in seconds).
  if (askedToWait && result.statusCode === 429) {
    return { delivery: { status: 'pending', nextAttemptAt: pauseUntil!, failures }, endpoint: { kind: 'failure', circuit: false, gone: false, pauseUntil } };
  }
  const endpoint: EndpointVerdict = { kind: 'failure', circuit: true, gone: result.statusCode === 410, pauseUntil };
  const counted = failures + 1;
  if (counted >= policy.scheduleMs.length) return { delivery: { status: 'failed', failures: counted }, endpoint };
  const delayMs = Math.max(jittered(policy.scheduleMs[counted]!, random), retryAfterMs ?? 0);
  return { delivery: { status: 'pending', nextAttemptAt: new Date(now.getTime() + delayMs), failures: counted }, endpoint };
}

/** When a newly recorded delivery is first due. */
export function firstAttemptAt(policy: RetryPolicy, now: Date, random: () => number = Math.random): Date {
  return new Date(now.getTime() + jittered(policy.scheduleMs[0] ?? 0, random));
}

function jittered(delayMs: number, random: () => number): number {
  return Math.round(delayMs * (1 - JITTER + 2 * JITTER * random()));
}
