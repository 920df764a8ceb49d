DROP TABLE IF EXISTS pending_events;
