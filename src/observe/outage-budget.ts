/**
 * How long the slot can go unread (every relay down, the network cut) before Postgres may
 * invalidate it, losing every event in the WAL it held: the first of
 * - idle_replication_slot_timeout (Postgres 18): a slot inactive that long is invalidated at
 *   the next checkpoint; counted from now while it is read, from inactive_since when not;
 * - max_slot_wal_keep_size: the WAL still allowed (safe_wal_size) at the rate the server writes.
 * Null when nothing bounds it (no timeout, no WAL limit, or no WAL written).
 */
export interface OutageBudgetInput {
  /** idle_replication_slot_timeout in seconds; null when 0 (off) or before Postgres 18. */
  readonly idleTimeoutSeconds: number | null;
  /** When the slot stopped being read (inactive_since, 17+); null while it is read, or unknown. */
  readonly inactiveSinceMs: number | null;
  readonly nowMs: number;
  /** safe_wal_size; null when max_slot_wal_keep_size is unlimited. */
  readonly safeWalSizeBytes: number | null;
  /** The WAL the server writes per second (on a standby: what it replays, the primary's). */
  readonly walBytesPerSecond: number | null;
}

export function outageBudgetSeconds(input: OutageBudgetInput): number | null {
  const bounds: number[] = [];
  if (input.idleTimeoutSeconds !== null) {
    const idleFor = input.inactiveSinceMs === null ? 0 : Math.max(0, (input.nowMs - input.inactiveSinceMs) / 1000);
    bounds.push(Math.max(0, input.idleTimeoutSeconds - idleFor));
  }
  if (input.safeWalSizeBytes !== null && input.walBytesPerSecond !== null && input.walBytesPerSecond > 0) {
    bounds.push(Math.max(0, input.safeWalSizeBytes) / input.walBytesPerSecond);
  }
  return bounds.length === 0 ? null : Math.min(...bounds);
}

/** The budget of a slot as readSlot reports it (no slot: only the idle timeout counts), at a WAL rate. */
export function slotOutageBudget(slot: { readonly exists: boolean; readonly idleTimeoutSeconds: number | null; readonly inactiveSince: Date | null; readonly safeWalSizeBytes: number | null }, walBytesPerSecond: number | null, nowMs = Date.now()): number | null {
  return outageBudgetSeconds({ idleTimeoutSeconds: slot.idleTimeoutSeconds, inactiveSinceMs: slot.inactiveSince?.getTime() ?? null, nowMs, safeWalSizeBytes: slot.exists ? slot.safeWalSizeBytes : null, walBytesPerSecond });
}

/** A duration an operator reads at a glance: 45 s, 12 min, 3.5 h, 2.1 days. */
export function formatDuration(seconds: number): string {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7_200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${(seconds / 3_600).toFixed(1)} h`;
  return `${(seconds / 86_400).toFixed(1)} days`;
}
