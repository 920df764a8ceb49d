-- Rules versions (docs/rules.md#versions): each
-- pool's current version and the sequence from which it holds; refusals
-- recorded by their stable code, with the message kept beside it.

ALTER TABLE checkpoints
    ADD COLUMN rules       int    NOT NULL DEFAULT 0,
    ADD COLUMN rules_since bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN checkpoints.rules IS 'Rules version the pool runs under after last_seq, named by its last plan (a stored plan without one means 1); 0 while the pool has no plan.';
COMMENT ON COLUMN checkpoints.rules_since IS 'Sequence of the plan from which that rules version holds.';

ALTER TABLE events ADD COLUMN refusal_detail text NULL;
COMMENT ON COLUMN events.refused IS 'Stable code of the refusal (unknown_consumer, malformed, ...) when the engine refused the event; it then changed nothing. The hash chain covers the code.';
COMMENT ON COLUMN events.refusal_detail IS 'The refusal in words, for people; not covered by the hash chain, so it may be reworded by later builds.';
