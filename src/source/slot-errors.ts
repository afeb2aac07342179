import { RelayError } from '../errors.js';

/**
 * The slot is gone: dropped, or Postgres failed over to a server without it. A new one would
 * skip every event committed in between, so neither `setup` nor `run` makes one.
 */
export function slotMissing(slot: string, detail: string): RelayError {
  return new RelayError(
    'SOURCE_SLOT_MISSING',
    `replication slot "${slot}" does not exist (dropped, or Postgres failed over to a server without it) ${detail}. ` +
      'A new slot starts at the current WAL position and would skip every event committed since the old one stopped: ' +
      '`outbox-relay recover --dry-run` says what would be published again, `outbox-relay recover` re-creates the slot and publishes it, then `run` goes on',
    { details: { slot } },
  );
}

/** Why Postgres invalidated a slot (pg_replication_slots.invalidation_reason, 17+), and how to keep it from happening again. */
const INVALIDATIONS: Record<string, { readonly why: string; readonly prevent: string }> = {
  wal_removed: { why: 'Postgres removed WAL the slot still needed (max_slot_wal_keep_size)', prevent: 'raise max_slot_wal_keep_size or alert on OutboxRelaySlotSafeWalSizeLow before it happens again' },
  idle_timeout: { why: 'it was unread for longer than idle_replication_slot_timeout', prevent: 'raise idle_replication_slot_timeout above the longest relay outage you must survive, or set it to 0 (OutboxRelaySlotOutageBudgetShort warns first)' },
  rows_removed: { why: 'the primary removed catalog rows the slot still needed (on a standby: hot_standby_feedback off, or no physical slot on the primary)', prevent: "keep hot_standby_feedback = on and primary_slot_name set on the standby that holds the slot" },
  wal_level_insufficient: { why: 'wal_level was lowered below logical on the primary', prevent: 'keep wal_level = logical' },
};

/** The invalidation as slotLost says it; an unknown reason (a later Postgres) named as Postgres gave it. */
export function invalidation(reason: string): { readonly why: string; readonly prevent: string } {
  return INVALIDATIONS[reason] ?? { why: `Postgres invalidated it (${reason})`, prevent: 'see why in the Postgres log before recovering' };
}

/**
 * A slot that lost WAL cannot be streamed again, and a new slot would start after events the
 * relay never read: the relay stops, says why, and says how to recover without loss.
 */
export function slotLost(slot: string, confirmed: string | null, why: string, cause?: unknown, prevent = INVALIDATIONS.wal_removed!.prevent): RelayError {
  return new RelayError(
    'SOURCE_SLOT_LOST',
    `replication slot "${slot}" is lost: ${why}. Events committed after its last confirmed position${confirmed ? ` (${confirmed})` : ''} may not have reached Kafka, ` +
      'and the relay will not skip them with a fresh slot. To recover: `outbox-relay recover --dry-run` says what would be published again, ' +
      `\`outbox-relay recover\` re-creates the slot and publishes it (consumers drop what they already have by event_id), then \`run\` goes on; ${prevent}`,
    { cause, details: { slot, confirmed } },
  );
}
