-- 0004: exact event times and halted pools.

-- PostgreSQL's timestamptz keeps microseconds; the log keeps the
-- nanoseconds the ledger stamped. time_ns keeps the rest, so that
-- time + time_ns nanoseconds is exactly the event's time in the log.
ALTER TABLE events ADD COLUMN time_ns smallint NOT NULL DEFAULT 0 CHECK (time_ns BETWEEN 0 AND 999);
COMMENT ON COLUMN events.time_ns IS 'Nanoseconds past the microsecond of time (0..999): time + time_ns ns is the exact time in the log.';

-- A pool whose fold failed (a bug, or an event the engine cannot take)
-- stops there while every other pool goes on being projected.
CREATE TABLE halted_pools (
    pool      text        PRIMARY KEY,
    seq       bigint      NOT NULL,
    reason    text        NOT NULL,
    halted_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE halted_pools IS 'Pools the projector stopped projecting because folding one of their events failed; the other pools go on. A restart (after an upgrade that fixes the cause) retries them.';
COMMENT ON COLUMN halted_pools.pool IS 'The halted pool.';
COMMENT ON COLUMN halted_pools.seq IS 'Stream sequence of the event whose fold failed; the pool''s projection stands just before it.';
COMMENT ON COLUMN halted_pools.reason IS 'Why the fold failed.';
COMMENT ON COLUMN halted_pools.halted_at IS 'When the projector halted the pool.';
