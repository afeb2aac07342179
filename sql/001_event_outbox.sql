-- The outbox table. Applications INSERT into it in the same transaction as their domain change;
-- the relay reads the inserts from the WAL, so there is no "sent" column and no UPDATE, ever.
-- `outbox-relay setup` runs this file (with the table name from OUTBOX_TABLE); it is also fine
-- to apply it with psql or your migration tool.
CREATE TABLE IF NOT EXISTS event_outbox (
  event_id       text        NOT NULL PRIMARY KEY,
  aggregate_type text        NOT NULL,
  aggregate_id   text        NOT NULL,
  event_type     text        NOT NULL,
  payload        jsonb       NOT NULL,
  -- Extra Kafka headers, e.g. {"traceparent": "00-..."}; string values.
  headers        jsonb,
  created_at     timestamptz NOT NULL DEFAULT now()
);

-- The prune sidecar deletes by age.
CREATE INDEX IF NOT EXISTS event_outbox_created_at_idx ON event_outbox (created_at);
