-- Thousands of pools (issue 20): the projector keeps only the pools it
-- folds lately in memory. When it lets one go (or stops), it saves the
-- pool's engine state here, so that taking the pool up again, or starting,
-- needs no fold of the log: one row per pool, the newest. A cache, not
-- history: unlike snapshots, rows are replaced, and nothing but the
-- projector reads them.
CREATE TABLE saved_states (
    pool       text        NOT NULL PRIMARY KEY,
    seq        bigint      NOT NULL,
    format     int         NOT NULL,
    state      bytea       NOT NULL,
    state_hash bytea       NOT NULL,
    snap_events int        NOT NULL,
    snap_cost  bigint      NOT NULL,
    saved_at   timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE saved_states IS 'The engine state of each pool as the projector last let it go out of memory or stopped: where it takes the pool up again without folding the log (a cache; snapshots are the history).';
COMMENT ON COLUMN saved_states.pool IS 'Pool.';
COMMENT ON COLUMN saved_states.seq IS 'Sequence of the last event folded into the state.';
COMMENT ON COLUMN saved_states.format IS 'Serialisation format version of state (as snapshots.format).';
COMMENT ON COLUMN saved_states.state IS 'The serialised state (as snapshots.state).';
COMMENT ON COLUMN saved_states.state_hash IS 'State hash of the state, as recorded for seq.';
COMMENT ON COLUMN saved_states.snap_events IS 'Events of the pool folded since its newest snapshot, up to seq: where the projector''s count towards the next snapshot resumes.';
COMMENT ON COLUMN saved_states.snap_cost IS 'Their work in the projector''s cost units (projections.foldCost), likewise.';
COMMENT ON COLUMN saved_states.saved_at IS 'When the projector saved it.';
