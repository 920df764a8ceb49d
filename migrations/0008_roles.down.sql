-- Back to 0006: every right of the three roles withdrawn (the roles
-- themselves are the cluster's, perhaps used by other databases: kept),
-- functions and temporary tables open to everyone again as PostgreSQL
-- makes them by default.
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM ledger_projector, ledger_api, ledger_reporting;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM ledger_projector, ledger_api, ledger_reporting;
REVOKE USAGE ON SCHEMA public FROM ledger_projector, ledger_api, ledger_reporting;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC;
DO $$ BEGIN
  EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO PUBLIC', current_database());
END $$;
