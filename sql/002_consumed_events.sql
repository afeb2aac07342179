-- Idempotent consumers (outbox-relay/client createIdempotentConsumer): one row per event a
-- consumer group has applied, inserted in the same transaction as the event's effect. A second
-- delivery of the same event_id (a relay replay after a crash, a consumer restart before its
-- offset commit, `outbox-relay replay`) conflicts on the primary key and is skipped.
-- Apply with psql or your migration tool, or call ensureConsumedEventsTable(pool).
CREATE TABLE IF NOT EXISTS consumed_events (
  consumer_group text        NOT NULL,
  event_id       text        NOT NULL,
  consumed_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer_group, event_id)
);

-- pruneConsumedEvents deletes by age. Keep rows at least as long as an event can come again:
-- the Kafka topic's retention, and the outbox retention if you use `outbox-relay replay`.
CREATE INDEX IF NOT EXISTS consumed_events_consumed_at_idx ON consumed_events (consumed_at);
