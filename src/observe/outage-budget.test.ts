import { describe, expect, it } from 'vitest';
import { formatDuration, outageBudgetSeconds } from './outage-budget.js';

const NOW = Date.parse('2026-12-04T12:00:00Z');
const none = { idleTimeoutSeconds: null, inactiveSinceMs: null, nowMs: NOW, safeWalSizeBytes: null, walBytesPerSecond: null };

describe('outageBudgetSeconds', () => {
  it('is unbounded without an idle timeout or a WAL limit', () => {
    expect(outageBudgetSeconds(none)).toBeNull();
    // A WAL limit with no WAL being written bounds nothing yet.
    expect(outageBudgetSeconds({ ...none, safeWalSizeBytes: 1 << 30, walBytesPerSecond: 0 })).toBeNull();
  });

  it('is the whole idle timeout while the slot is read, and what is left of it once it is not', () => {
    expect(outageBudgetSeconds({ ...none, idleTimeoutSeconds: 3_600 })).toBe(3_600);
    expect(outageBudgetSeconds({ ...none, idleTimeoutSeconds: 3_600, inactiveSinceMs: NOW - 600_000 })).toBe(3_000);
    expect(outageBudgetSeconds({ ...none, idleTimeoutSeconds: 3_600, inactiveSinceMs: NOW - 7_200_000 })).toBe(0);
  });

  it('is the WAL still allowed at the rate it is written, or the idle timeout, whichever comes first', () => {
    expect(outageBudgetSeconds({ ...none, safeWalSizeBytes: 1 << 30, walBytesPerSecond: 1 << 20 })).toBe(1_024);
    expect(outageBudgetSeconds({ ...none, idleTimeoutSeconds: 600, safeWalSizeBytes: 1 << 30, walBytesPerSecond: 1 << 20 })).toBe(600);
    expect(outageBudgetSeconds({ ...none, safeWalSizeBytes: -5, walBytesPerSecond: 1 << 20 })).toBe(0);
  });
});

describe('formatDuration', () => {
  it('reads at a glance', () => {
    expect([45, 720, 12_600, 181_440].map(formatDuration)).toEqual(['45 s', '12 min', '3.5 h', '2.1 days']);
  });
});
