-- 0008: least privilege (issue 21). Every identity that connects gets a
-- role with exactly the rights its job needs; the owner of the tables
-- (the role that runs these migrations, `ledger` in `ledger dev` and
-- docker-compose.yml) is the only one that changes the schema.
--
--   ledger_projector  the projector: reads the projection and writes it
--                     (rows appended, current state replaced, history
--                     intervals closed), nothing else
--   ledger_api        `ledger serve` and the console: reads
--   ledger_reporting  the DATABASE_URL `ledger dev` prints (psql, BI
--                     tools, audit, replay, load --check, recover):
--                     SELECT on the tables README documents and EXECUTE
--                     on allocations_as_of*, nothing else
--
-- The roles are the cluster's (CREATE ROLE needs CREATEROLE): `ledger dev`
-- creates them as logins with passwords before it migrates; elsewhere
-- whoever migrates creates them here when allowed (without login: the
-- administrator gives each a password), and migrations.Up refuses
-- beforehand, saying which are missing, when it may not. Re-running this
-- file gives the same rights (REVOKE first, then GRANT).

DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['ledger_projector', 'ledger_api', 'ledger_reporting'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', r);
      EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL; -- created meanwhile by another migration of the same cluster
      END;
    END IF;
  END LOOP;
END $$;

-- Nobody but the owner creates anything here: no table in the schema, no
-- temporary table, no function callable by anyone.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
DO $$ BEGIN
  EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
END $$;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM ledger_projector, ledger_api, ledger_reporting;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM ledger_projector, ledger_api, ledger_reporting;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM ledger_projector, ledger_api, ledger_reporting;
GRANT USAGE ON SCHEMA public TO ledger_projector, ledger_api, ledger_reporting;

-- Readers: the documented tables and the as-of functions (with the
-- helper they call).
GRANT SELECT ON events, consumers, hosts, allocations, consumer_state, decisions,
    allocation_history, ownership, ownership_history, checkpoints, snapshots,
    halted_pools, projector_offsets, saved_states
    TO ledger_api, ledger_reporting, ledger_projector;
GRANT EXECUTE ON FUNCTION allocations_as_of(text, bigint), allocations_as_of_time(text, timestamptz),
    consumer_and_ancestors(text)
    TO ledger_api, ledger_reporting;

-- The services check the schema version at start (golang-migrate reads
-- it); reporting has no business with it.
GRANT SELECT ON schema_migrations TO ledger_projector, ledger_api;

-- The projector's writes (projections/write.go, halt.go, resident.go): the log's copy,
-- decisions and snapshots are appended, never changed; history intervals
-- are appended and closed (only their end is ever updated); the current
-- state is upserted and replaced; offsets, checkpoints and saved states
-- upserted.
GRANT INSERT ON events, decisions, snapshots TO ledger_projector;
GRANT INSERT, UPDATE (valid_to_seq, valid_to_time) ON allocation_history, ownership_history TO ledger_projector;
GRANT INSERT, DELETE ON consumers, halted_pools TO ledger_projector;
GRANT INSERT, UPDATE, DELETE ON consumer_state, allocations, ownership TO ledger_projector;
GRANT INSERT, UPDATE ON hosts, checkpoints, projector_offsets, saved_states TO ledger_projector;
