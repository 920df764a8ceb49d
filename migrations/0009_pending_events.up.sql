-- One busy pool does not hold the others back (issue 20): when a pool's
-- events would take more than its share of a batch while other pools'
-- events wait behind them, the projector sets them aside here, with the
-- batch that passes them, and folds them in the next batches, before the
-- pool's later events. So every event up to projector_offsets.stream_seq
-- is in events or here, and the offset may be ahead of a pool's
-- checkpoint. (Re-running this file is harmless.)
CREATE TABLE IF NOT EXISTS pending_events (
    pool      text        NOT NULL,
    seq       bigint      NOT NULL,
    subject   text        NOT NULL,
    headers   jsonb       NULL,
    body      bytea       NOT NULL,
    stored_at timestamptz NOT NULL,
    PRIMARY KEY (pool, seq)
);
COMMENT ON TABLE pending_events IS 'Stream messages the projector has passed (they are below its offset) but not folded yet: a busy pool''s events set aside so that the other pools go on; folded, in order, in the next batches. Every sequence up to projector_offsets.stream_seq is in events or here.';
COMMENT ON COLUMN pending_events.pool IS 'Pool.';
COMMENT ON COLUMN pending_events.seq IS 'Stream sequence of the message.';
COMMENT ON COLUMN pending_events.subject IS 'Subject the message was stored under (ledger.<pool>.<type>).';
COMMENT ON COLUMN pending_events.headers IS 'Every header of the stored message, as {"Name": ["value", ...]} (as events.headers).';
COMMENT ON COLUMN pending_events.body IS 'The stored message body, byte for byte.';
COMMENT ON COLUMN pending_events.stored_at IS 'When the stream stored it (the time of a body that is no envelope).';

-- The roles of 0008: readers see it (audit verify holds the checkpoints
-- to it); the projector adds and removes rows.
GRANT SELECT ON pending_events TO ledger_api, ledger_reporting, ledger_projector;
GRANT INSERT, DELETE ON pending_events TO ledger_projector;
