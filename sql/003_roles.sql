-- Least-privilege roles: the relay, the pruner, and the applications that write events.
-- `outbox-relay setup --print-roles` prints this file for your outbox table (OUTBOX_TABLE);
-- `outbox-relay setup --create-roles` applies it. Run it once as a superuser (creating a role
-- with REPLICATION needs one). No password is set here: give each LOGIN role one afterwards
-- (ALTER ROLE outbox_relay PASSWORD '...'), or a client certificate, as your servers require.

-- Each role is created if missing: a role that exists is duplicate_object; one another session is
-- creating at the same moment is unique_violation once that session commits (two setups at once).

-- The relay streams from the slot (REPLICATION); it reads the outbox only for `replay` and
-- `status`. It writes nothing: no "sent" flag, no mark.
DO $$ BEGIN CREATE ROLE outbox_relay LOGIN REPLICATION; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
GRANT USAGE ON SCHEMA public TO outbox_relay;
GRANT SELECT ON public.event_outbox TO outbox_relay;

-- The pruner deletes old rows, and keeps its marks (which WAL position and transactions each
-- prune has passed) in a table of its own that `setup` creates.
DO $$ BEGIN CREATE ROLE outbox_pruner LOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
GRANT USAGE ON SCHEMA public TO outbox_pruner;
GRANT SELECT, DELETE ON public.event_outbox TO outbox_pruner;
GRANT SELECT, INSERT, DELETE ON public.event_outbox_prune_marks TO outbox_pruner;

-- Applications insert only: GRANT outbox_writer TO your_service_role;
DO $$ BEGIN CREATE ROLE outbox_writer NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
GRANT USAGE ON SCHEMA public TO outbox_writer;
GRANT INSERT ON public.event_outbox TO outbox_writer;
