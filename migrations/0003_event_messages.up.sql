-- 0003: the stream message of each event as it was stored, so that a
-- stream that lost its tail (a crash before JetStream synced it) can be
-- given back exactly the events the projection holds (`ledger recover`).
-- Rows projected before 0003 have NULLs here.

ALTER TABLE events
    ADD COLUMN subject text  NULL,
    ADD COLUMN headers jsonb NULL,
    ADD COLUMN body    bytea NULL;
COMMENT ON COLUMN events.subject IS 'Subject the message was stored under (ledger.<pool>.<type>); NULL for rows projected before migration 0003.';
COMMENT ON COLUMN events.headers IS 'Every header of the stored message, as {"Name": ["value", ...]} (Nats-Msg-Id among them); NULL before migration 0003.';
COMMENT ON COLUMN events.body IS 'The stored message body, byte for byte (the envelope the hash chain covers); NULL before migration 0003.';
