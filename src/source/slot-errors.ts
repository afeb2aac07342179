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

/**
 * A slot that lost WAL cannot be streamed again, and a new slot would start after events the
 * relay never read: the relay stops, says why, and says how to recover without loss.
 */
export function slotLost(slot: string, confirmed: string | null, why: string, cause?: unknown): RelayError {
  return new RelayError(
    'SOURCE_SLOT_LOST',
    `replication slot "${slot}" is lost: ${why}. Events committed after its last confirmed position${confirmed ? ` (${confirmed})` : ''} may not have reached Kafka, ` +
      'and the relay will not skip them with a fresh slot. To recover: `outbox-relay recover --dry-run` says what would be published again, ' +
      '`outbox-relay recover` re-creates the slot and publishes it (consumers drop what they already have by event_id), then `run` goes on; ' +
      'raise max_slot_wal_keep_size or alert on OutboxRelaySlotSafeWalSizeLow before it happens again',
    { cause, details: { slot, confirmed } },
  );
}
