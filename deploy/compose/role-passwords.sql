-- docker-compose only (the `role-passwords` service, psql as postgres): passwords for the roles
-- `outbox-relay setup --create-roles` made without one, read from the compose secrets, and a
-- role for the demo's services and one for the webhooks service. Idempotent: runs at every
-- `docker compose up`, after `setup` and `webhooks-setup`.
\set ON_ERROR_STOP on
-- Quiet on the second run ("already a member").
SET client_min_messages = warning;
\set relay_password `cat /run/secrets/relay-db-password`
\set pruner_password `cat /run/secrets/pruner-db-password`
\set demo_password `cat /run/secrets/demo-db-password`
\set webhooks_password `cat /run/secrets/webhooks-db-password`

ALTER ROLE outbox_relay PASSWORD :'relay_password';
ALTER ROLE outbox_pruner PASSWORD :'pruner_password';

-- The demo's billing and entitlement services: their own tables, and outbox inserts only.
DO $$ BEGIN CREATE ROLE outbox_demo LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
ALTER ROLE outbox_demo PASSWORD :'demo_password';
GRANT outbox_writer TO outbox_demo;
GRANT CREATE ON SCHEMA public TO outbox_demo;

-- The webhooks service (`outbox-relay webhooks`, and its admin commands through
-- `docker compose exec webhooks`): the rows of the webhook tables that `webhooks-setup` made as
-- the superuser, nothing else (no DDL, no outbox, no REPLICATION). Granted again at each `up`, so
-- that a table a newer `webhooks setup` adds is covered too.
DO $$ BEGIN CREATE ROLE outbox_webhooks LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
ALTER ROLE outbox_webhooks PASSWORD :'webhooks_password';
GRANT USAGE ON SCHEMA outbox_webhooks TO outbox_webhooks;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA outbox_webhooks TO outbox_webhooks;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA outbox_webhooks TO outbox_webhooks;
