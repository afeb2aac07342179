-- Webhooks (`outbox-relay webhooks`): the endpoints customers registered, and a durable record of
-- every delivery owed to them. `outbox-relay webhooks setup` applies this file, idempotently, in
-- the schema OUTBOX_WEBHOOK_SCHEMA names (outbox_webhooks here, its default).

CREATE SCHEMA IF NOT EXISTS outbox_webhooks;

-- Made again at the end of this file: a view cannot change its columns in place, and it holds
-- the columns it reads against a later setup's ALTERs.
DROP VIEW IF EXISTS outbox_webhooks.all_attempts;

-- One row per receiving endpoint. The dispatcher keeps its circuit, pause and failure streak
-- here, so every webhooks process sees the same state.
CREATE TABLE IF NOT EXISTS outbox_webhooks.endpoints (
  id                   text        PRIMARY KEY,
  url                  text        NOT NULL,
  -- Exact types (invoice.paid) or patterns (invoice.*, *): a `*` stands for one or more dot-separated words at the end.
  event_types          text[]      NOT NULL,
  -- [{"secret": "whsec_...", "expires_at": null | ISO time}], newest first: every secret not yet
  -- expired signs, so a receiver can switch to the new one while the old one still verifies.
  secrets              jsonb       NOT NULL,
  headers              jsonb       NOT NULL DEFAULT '{}',
  max_in_flight        integer     NOT NULL DEFAULT 10 CHECK (max_in_flight > 0),
  -- Attempts per second, across every process; null: no limit.
  rate_limit           integer     CHECK (rate_limit > 0),
  -- Deliver one aggregate's events one at a time, in order: the next waits for the previous one's success.
  ordered              boolean     NOT NULL DEFAULT false,
  description          text,
  -- The events it is owed: those produced to Kafka (their record's timestamp) at or after this
  -- time. By default the time it was added: a new endpoint is not sent the history that a new
  -- consumer group reads from the topics' beginning. -infinity: every event the topics hold.
  -- Milliseconds, as Kafka's timestamps are.
  deliver_from         timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  disabled_at          timestamptz,
  disabled_reason      text,
  -- The first failure since the last success; disabled when it is older than OUTBOX_WEBHOOK_DISABLE_AFTER.
  failing_since        timestamptz,
  consecutive_failures integer     NOT NULL DEFAULT 0,
  -- Nothing is sent before this time: the circuit is open, or the endpoint asked (Retry-After).
  paused_until         timestamptz,
  -- The rate limit's one-second window (written only for endpoints with a rate limit).
  rate_window          timestamptz,
  rate_window_count    integer     NOT NULL DEFAULT 0,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now()
);

-- Endpoints of an earlier setup were owed every event they were subscribed to: they keep that.
ALTER TABLE outbox_webhooks.endpoints ADD COLUMN IF NOT EXISTS deliver_from timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE outbox_webhooks.endpoints ALTER COLUMN deliver_from SET DEFAULT date_trunc('milliseconds', now());

-- Whose endpoint it is: one customer's (an id the platform already uses, e.g. cus_123), receiving
-- that customer's events only, or platform-wide (an internal consumer), receiving every
-- customer's. Never both, and fixed once set: its deliveries are that customer's. An endpoint of
-- an earlier setup has neither until an operator says (`webhooks endpoint update --customer` or
-- `--platform-wide`): it receives nothing meanwhile, and the webhooks process refuses to start
-- (WEBHOOK_ENDPOINTS_UNASSIGNED), so that an upgrade cannot go on sending one customer's events
-- to another.
ALTER TABLE outbox_webhooks.endpoints
  ADD COLUMN IF NOT EXISTS customer_id   text,
  ADD COLUMN IF NOT EXISTS platform_wide boolean NOT NULL DEFAULT false;
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'outbox_webhooks.endpoints'::regclass AND conname = 'endpoints_one_audience') THEN
    ALTER TABLE outbox_webhooks.endpoints ADD CONSTRAINT endpoints_one_audience CHECK (NOT (platform_wide AND customer_id IS NOT NULL));
  END IF;
END $$;
-- A customer's endpoints, for the listings by customer (the consumer matches in memory).
CREATE INDEX IF NOT EXISTS endpoints_customer_idx ON outbox_webhooks.endpoints (customer_id, id) WHERE customer_id IS NOT NULL;
-- Endpoints with a failure streak, a circuit count or a pause: what a success may have to clear,
-- and where open circuits are counted. Most completions are successes on endpoints with none of
-- these; through this index their endpoints are not read at all (DeliveryStore.applyEndpointEffects).
-- Keep the predicate as troubledEndpoint (src/webhooks/webhook-tables.ts) writes it.
CREATE INDEX IF NOT EXISTS endpoints_troubled_idx ON outbox_webhooks.endpoints (id)
  WHERE consecutive_failures <> 0 OR failing_since IS NOT NULL OR paused_until IS NOT NULL;
-- The disabled endpoints, counted for a gauge every housekeeping round without reading the others.
CREATE INDEX IF NOT EXISTS endpoints_disabled_idx ON outbox_webhooks.endpoints (id) WHERE disabled_at IS NOT NULL;

-- Bumped on every change of who receives what, and of what a request to an endpoint needs (its
-- address, secrets, headers, limit, order, rate): intake processes reload their subscriptions
-- and those settings when it moves, and send no first attempt on settings older than it.
CREATE TABLE IF NOT EXISTS outbox_webhooks.subscriptions_version (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version   bigint  NOT NULL DEFAULT 0
);
INSERT INTO outbox_webhooks.subscriptions_version DEFAULT VALUES ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION outbox_webhooks.bump_subscriptions_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE outbox_webhooks.subscriptions_version SET version = version + 1;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS endpoints_subscriptions_changed ON outbox_webhooks.endpoints;
CREATE TRIGGER endpoints_subscriptions_changed
  AFTER INSERT OR DELETE OR UPDATE OF event_types, deliver_from, customer_id, platform_wide, url, secrets, headers, max_in_flight, ordered, rate_limit ON outbox_webhooks.endpoints
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_webhooks.bump_subscriptions_version();

-- One row per event owed to at least one endpoint: the exact body every attempt sends (a retry
-- signs the same bytes), stored once however many endpoints receive it.
CREATE TABLE IF NOT EXISTS outbox_webhooks.events (
  event_id       text        PRIMARY KEY,
  event_type     text        NOT NULL,
  aggregate_id   text,
  body           text        NOT NULL,
  -- The Kafka record's timestamp: the start of "event to first attempt".
  produced_at    timestamptz NOT NULL,
  recorded_at    timestamptz NOT NULL DEFAULT now()
);

-- The event types the stage has recorded events of, each with its first event's Kafka timestamp:
-- `GET /v1/event-types`. A row per type, written by the recording that first brings the type (an
-- insert that finds its type here writes nothing), and kept when the type's events are pruned.
-- An index of the events by type did this before at the price of an index entry per event.
CREATE TABLE IF NOT EXISTS outbox_webhooks.event_types (
  event_type    text        PRIMARY KEY,
  first_seen_at timestamptz NOT NULL
);

-- An earlier setup listed the types through that index: its events' types are carried over, once.
DO $$
BEGIN
  IF to_regclass('outbox_webhooks.events_type_idx') IS NOT NULL THEN
    INSERT INTO outbox_webhooks.event_types (event_type, first_seen_at)
      SELECT event_type, min(produced_at) FROM outbox_webhooks.events GROUP BY event_type
      ON CONFLICT (event_type) DO NOTHING;
    DROP INDEX outbox_webhooks.events_type_idx;
  END IF;
END $$;

-- The answers of `webhooks api` creates given an Idempotency-Key: the same key and body get the
-- same answer again (an endpoint's secret included: it is in the endpoints table already), for
-- a day. The key is kept as a digest with the caller's identity, never as given.
CREATE TABLE IF NOT EXISTS outbox_webhooks.api_idempotency (
  key_digest     text        PRIMARY KEY,
  request_digest text        NOT NULL,
  -- Null while the first request runs.
  status_code    integer,
  response       jsonb,
  created_at     timestamptz NOT NULL DEFAULT now()
);

-- Events whose customer the rule (OUTBOX_WEBHOOK_CUSTOMER_FROM) could not find: a missing
-- header, a null field. No customer's endpoint was owed them (platform-wide ones were, as
-- deliveries). Kept until `webhooks replay --without-customer` finds their customer (the rule
-- fixed, or the operator naming it), which records their deliveries; never guessed. Each holds
-- what the rule reads (the body's data, the record's headers, the aggregate id).
CREATE TABLE IF NOT EXISTS outbox_webhooks.events_without_customer (
  event_id     text        PRIMARY KEY,
  event_type   text        NOT NULL,
  aggregate_id text,
  body         text        NOT NULL,
  headers      jsonb       NOT NULL,
  produced_at  timestamptz NOT NULL,
  -- What the rule found missing, e.g. "no header customer_id".
  reason       text        NOT NULL,
  recorded_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per (event, endpoint), recorded before the Kafka offset is committed.
-- status: pending (due at next_attempt_at; leased while lease_owner is set and next_attempt_at
-- is ahead), delivered, failed (attempts exhausted; `webhooks replay` makes it pending again).
-- event_id has no foreign key: its check is a lookup and a row lock (a WAL record) for every
-- delivery, about a fifth of Postgres's work per delivery on the hot path. The intake writes the event
-- in the same transaction and locks its row (ON CONFLICT DO UPDATE), which is what keeps the
-- pruner from deleting an event a delivery is being recorded for.
CREATE TABLE IF NOT EXISTS outbox_webhooks.deliveries (
  id              bigserial   PRIMARY KEY,
  event_id        text        NOT NULL,
  -- No foreign key (see below, after attempts): removing an endpoint removes its deliveries all the same.
  endpoint_id     text        NOT NULL,
  -- The aggregate, for an ordered endpoint (null for the others): it sends one aggregate's
  -- deliveries one at a time, by id. Set when recorded: `--ordered` applies from then on.
  ordering_key    text,
  status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  -- Attempts started (numbering them), and failures counted against the retry schedule (a 429
  -- with Retry-After is an attempt, not a failure).
  attempts        integer     NOT NULL DEFAULT 0,
  failures        integer     NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL,
  lease_owner     text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  finished_at     timestamptz,
  last_error      text,
  UNIQUE (event_id, endpoint_id)
);

-- Attempt 1, when it ended before its delivery was recorded (a healthy endpoint's delivery is
-- sent first, then written once with its result): kept in its delivery's row, not as a row of
-- attempts, so the hot path writes one row per delivery rather than two. Null otherwise: every
-- other attempt is a row of attempts (all of them, in deliveries of an earlier setup).
-- all_attempts shows both. Added here, for a new table as for an earlier setup's.
ALTER TABLE outbox_webhooks.deliveries
  ADD COLUMN IF NOT EXISTS first_started_at  timestamptz,
  ADD COLUMN IF NOT EXISTS first_latency_ms  integer,
  ADD COLUMN IF NOT EXISTS first_status_code integer,
  ADD COLUMN IF NOT EXISTS first_outcome     text,
  ADD COLUMN IF NOT EXISTS first_error       text,
  ADD COLUMN IF NOT EXISTS first_response    text,
  ADD COLUMN IF NOT EXISTS first_process     text;

-- The dispatcher's questions touch pending rows only: how much history is kept does not slow it.
-- (endpoint, time, id): a claim takes an endpoint's due deliveries in exactly this order.
CREATE INDEX IF NOT EXISTS deliveries_due_idx ON outbox_webhooks.deliveries (endpoint_id, next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS deliveries_ordering_idx ON outbox_webhooks.deliveries (endpoint_id, ordering_key, id) WHERE status = 'pending' AND ordering_key IS NOT NULL;
-- Pruning by age.
CREATE INDEX IF NOT EXISTS deliveries_finished_idx ON outbox_webhooks.deliveries (finished_at) WHERE status <> 'pending';
-- An endpoint's deliveries, newest first: the API's and the portal's listings (a customer's
-- latest page reads each of its endpoints' newest entries and merges them), and the cascade of
-- an endpoint's removal. The one index of every delivery beside the primary key and the
-- (event, endpoint) key: every index is written again at each claim and completion, which
-- change indexed columns (its cost on the hot path: docs/performance.md, the webhooks API).
CREATE INDEX IF NOT EXISTS deliveries_endpoint_idx ON outbox_webhooks.deliveries (endpoint_id, id);
-- An endpoint's failed deliveries, newest first: the listings' status=failed without reading
-- the delivered ones. A row enters it only when it fails for good (rare), and leaves it on
-- replay: a delivered or pending delivery is never in it, so the hot path writes nothing to it.
CREATE INDEX IF NOT EXISTS deliveries_failed_idx ON outbox_webhooks.deliveries (endpoint_id, id) WHERE status = 'failed';

-- The webhooks processes alive, each renewing its row every second: each endpoint's limit of
-- deliveries in flight is shared over them, each process counting its own in memory, so a
-- delivery writes nothing for it (src/webhooks/endpoint-shares.ts). `view` and `settled`: the
-- membership a process moved to, and whether it holds no more than its share of it; a new
-- membership is used once every member says so.
CREATE TABLE IF NOT EXISTS outbox_webhooks.processes (
  owner        text        PRIMARY KEY,
  heartbeat_at timestamptz NOT NULL,
  view         text        NOT NULL,
  settled      boolean     NOT NULL
);

-- An earlier setup counted every delivery in flight in these two tables, a row written per
-- endpoint and process at each lease and completion. Processes of that version fail on their
-- next lease once they are gone: stop them before running this setup.
DROP TABLE IF EXISTS outbox_webhooks.endpoint_slots;
DROP TABLE IF EXISTS outbox_webhooks.endpoint_slots_returned;

-- Every attempt, as the endpoint answered it, but a first one kept in its delivery's row (the
-- first_* columns of deliveries). delivery_id has no foreign key (its check is a
-- lookup and a lock per attempt): a completion writes attempts only of deliveries it holds, and
-- the trigger below deletes a delivery's attempts with it, whoever deletes it.
CREATE TABLE IF NOT EXISTS outbox_webhooks.attempts (
  delivery_id  bigint      NOT NULL,
  attempt      integer     NOT NULL,
  started_at   timestamptz NOT NULL,
  latency_ms   integer     NOT NULL,
  status_code  integer,
  -- delivered, http_status, timeout, connect, refused_address, redirect, network.
  outcome      text        NOT NULL,
  error        text,
  -- The first bytes of the answer, for the operator (bounded: see OUTBOX_WEBHOOK_RESPONSE_SNIPPET).
  response     text,
  process      text        NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
);

-- Tables of an earlier setup had the three foreign keys.
ALTER TABLE outbox_webhooks.deliveries DROP CONSTRAINT IF EXISTS deliveries_event_id_fkey;
ALTER TABLE outbox_webhooks.deliveries DROP CONSTRAINT IF EXISTS deliveries_endpoint_id_fkey;
ALTER TABLE outbox_webhooks.attempts DROP CONSTRAINT IF EXISTS attempts_delivery_id_fkey;

-- A delivery's endpoint has no foreign key either: its check locked the endpoint's row (a WAL
-- record) for every endpoint a recording writes deliveries to, thousands a second with many
-- customers. What holds it instead: every recording takes this advisory lock shared, in its
-- first statement (DeliveryStore.storeEvents), and inserts deliveries only for endpoints its
-- later statements still find; removing endpoints takes it exclusively (below, whoever
-- deletes), so it waits for the recordings under way and deletes what they wrote, and the
-- recordings after it no longer find the endpoint. A removed endpoint leaves no delivery
-- behind, which one made later with the same id could be sent. The key is the schema's: see
-- WebhookTables.endpointsLockKey.
CREATE OR REPLACE FUNCTION outbox_webhooks.lock_out_recordings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(TG_TABLE_SCHEMA || '.endpoints removed'));
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS endpoints_removing ON outbox_webhooks.endpoints;
CREATE TRIGGER endpoints_removing
  BEFORE DELETE ON outbox_webhooks.endpoints
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_webhooks.lock_out_recordings();

CREATE OR REPLACE FUNCTION outbox_webhooks.delete_deliveries_of_removed_endpoints() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM outbox_webhooks.deliveries d USING removed r WHERE d.endpoint_id = r.id;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS endpoints_removed ON outbox_webhooks.endpoints;
CREATE TRIGGER endpoints_removed
  AFTER DELETE ON outbox_webhooks.endpoints
  REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_webhooks.delete_deliveries_of_removed_endpoints();

-- A delivery's attempts go with it (the pruner's deletes, an endpoint's cascade, an operator's
-- DELETE): once per statement, over the deleted rows, so inserts pay nothing for it.
CREATE OR REPLACE FUNCTION outbox_webhooks.delete_attempts_of_deleted_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM outbox_webhooks.attempts a USING deleted d WHERE a.delivery_id = d.id;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS deliveries_deleted ON outbox_webhooks.deliveries;
CREATE TRIGGER deliveries_deleted
  AFTER DELETE ON outbox_webhooks.deliveries
  REFERENCING OLD TABLE AS deleted
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_webhooks.delete_attempts_of_deleted_deliveries();

-- Every attempt of every delivery, wherever it is kept: what `webhooks attempts` reads, and what
-- an operator's own queries should read (attempts alone misses most first attempts).
CREATE VIEW outbox_webhooks.all_attempts AS
  SELECT delivery_id, attempt, started_at, latency_ms, status_code, outcome, error, response, process FROM outbox_webhooks.attempts
  UNION ALL
  SELECT id, 1, first_started_at, first_latency_ms, first_status_code, first_outcome, first_error, first_response, first_process
  FROM outbox_webhooks.deliveries WHERE first_started_at IS NOT NULL;

-- Readable by every role that may read attempts (the webhooks process's, for `webhooks
-- attempts`): made again above, the view lost its grants, and the operator's `GRANT ... ON ALL
-- TABLES` covered it only if it existed then.
DO $$
DECLARE reader text;
BEGIN
  FOR reader IN
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_class c, aclexplode(c.relacl) a
    WHERE c.oid = 'outbox_webhooks.attempts'::regclass AND a.privilege_type = 'SELECT' AND a.grantee <> c.relowner
  LOOP
    EXECUTE format('GRANT SELECT ON %s TO %s', 'outbox_webhooks.all_attempts'::regclass, reader);
  END LOOP;
END $$;
